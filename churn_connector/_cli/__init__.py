"""The churn-connector command line.

Exit codes (docs/reference/exit-codes.md): 0 every row delivered or skipped; 1 some rows
invalid, expired or held (not sent), the rest delivered; 2 some valid rows could not be delivered;
3 usage, configuration, authentication, input or ledger error, or an unreachable API;
130 / 143 interrupted by SIGINT / SIGTERM. The API key comes only from CHURN_API_KEY, never from an
argument.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import pyarrow

from ..__version__ import __version__
from .._client import Client
from .._core import (
    ChurnConnectorError,
    ClientConfig,
    ExitCode,
    Interrupted,
    RunStopped,
    StorageError,
    command_line,
    echoed,
    text_table,
)
from .._results import (
    check_receipts_path,
    check_result_path,
    not_read_row,
    now_utc,
    refuse_clashes,
    write_frames,
)
from .._run import Terminated, signal_of
from .flags import (
    add_data_arguments,
    add_send_arguments,
    add_sync_arguments,
    client_options,
    data_options,
    input_of,
    inputs_of,
    send_options,
    sync_options,
)
from .held import Signalled, signals_held
from .ledger import add_ledger_parser
from .ledger import run as ledger_command
from .plan import add_plan_parser, run_plan
from .resend import add_receipts, add_resend, result_receipt, run_resend, stopped_receipt
from .runs import add_runs_parser, run_runs
from .track import add_track_parser, run_track
from .validate import add_validate, run_validate

__all__ = ["build_parser", "main", "run"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.STOPPED, f"{self.prog}: error: {message}\n")


def _add_verbosity(p: argparse.ArgumentParser, default: Any) -> None:
    # on the main parser and on each subcommand, so -v/-q work before or after it
    p.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="log progress to stderr"
    )
    p.add_argument("-q", "--quiet", action="store_true", default=default, help="print errors only")


_EPILOG = """\
exit codes:
  0  every row delivered (or skipped as already delivered); validate: the gate passes
     (no invalid row, or none above --max-invalid; warnings allowed)
  1  some rows were invalid (or expired, or held by the ledger's re-id guard) and not
     sent, the rest delivered; validate:
     invalid rows above --max-invalid (any invalid row without it)
  2  some valid rows could not be delivered
  3  usage, configuration, input, authentication or ledger error; the API unreachable;
     validate: the check could not run (it never passes then)
  130, 143  interrupted by SIGINT (Ctrl-C) or SIGTERM; the result files are still written
  the highest that applies wins

The API key is read from the environment variable CHURN_API_KEY (never from an
argument, where shell history and process lists would keep it); the base URL from
--base-url or CHURN_BASE_URL.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="churn-connector",
        description="Validate warehouse exports of events and identities and send them to "
        "the ingestion API.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser, False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    add_validate(sub, lambda p: _add_verbosity(p, argparse.SUPPRESS))

    send = sub.add_parser("send", help="validate, then send the valid rows")
    _add_verbosity(send, argparse.SUPPRESS)
    add_data_arguments(send)
    send.add_argument("--results", type=Path, help="write the per-request frame (.csv/.parquet)")
    send.add_argument("--rows", type=Path, help="write the per-row frame (.csv/.parquet)")
    add_receipts(send)
    add_send_arguments(send)
    add_sync_arguments(send)
    add_resend(sub, lambda p: _add_verbosity(p, argparse.SUPPRESS))

    add_track_parser(sub, _add_verbosity)

    add_ledger_parser(sub, _add_verbosity)

    add_plan_parser(sub, _add_verbosity)

    add_runs_parser(sub, _add_verbosity)

    sub.add_parser(
        "sandbox", help="run the local sandbox API (see churn-connector sandbox -h)", add_help=False
    )
    demo = sub.add_parser("demo", help="sandbox + sample export + validate + send, offline")
    _add_verbosity(demo, argparse.SUPPRESS)
    demo.add_argument("--out", type=Path, default=Path("demo-output"), help="where files go")
    return parser


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(text)


def _send(args: argparse.Namespace) -> int:
    started = now_utc()
    check_result_path(args.results)  # before anything is read or sent, not after
    check_result_path(args.rows)
    check_receipts_path(args.receipts)
    refuse_clashes(inputs_of(args), [("--results", args.results), ("--rows", args.rows)])
    data = input_of(args)
    # a dry run contacts nothing: it needs no base URL and no key
    config = ClientConfig.create(api_key=None, dry_run=args.dry_run, **client_options(args))
    sender = Client(config=config)
    send = sender.send_events if args.kind == "events" else sender.identify
    try:
        result = send(
            data,
            progress=False if args.quiet else None,
            **send_options(args),
            **data_options(args),
            **sync_options(args),
        )
    except (RunStopped, Interrupted) as exc:
        # the run stopped: still leave the record of what was and was not delivered
        rows = None if exc.rows is None else [exc.rows]
        if rows is not None and exc.not_read is not None:
            rows.append(not_read_row(exc.not_read))
        _write_results(args, exc.chunks, rows)
        stopped_receipt(args, "send", args.kind, exc, started)
        raise
    _say(args, result.summary())
    synced = result.fingerprint.get("sync")
    if synced:
        _say(args, sync_line(synced))
    if result.n_rows == 0:
        _say(args, "the input holds no rows: nothing to send")
    first = result.first_failures(10)
    if not first.empty:
        width = shutil.get_terminal_size().columns - 1
        table = first.reset_index()[["row", "status", "error"]]  # the labels: a column here
        # what the input wrote (a value, a column name) made harmless, and capped
        table["error"] = [echoed(str(e)) for e in table["error"].tolist()]
        _say(args, text_table(table, width, wrap="error"))
    # block by block: flat memory; the per-request frame only when it is asked for (one row
    # a request: an identify's is as long as its input)
    chunks = result.chunks if args.results is not None else None
    written = _write_results(args, chunks, result.row_frames())
    result_receipt(args, "send", result)
    return result.exit_code if written else max(result.exit_code, ExitCode.STOPPED)


def sync_line(synced: dict[str, Any]) -> str:
    """One line on a sync's run: what it read, and where its watermark went."""
    read = ", ".join(f"{k} {v}" for k, v in synced["read"].items()) or "everything"
    verb = (
        "moved"
        if synced["moved"]
        else "stays"
        if synced["watermark_before"] == synced["watermark_after"]
        else "would move"
    )
    return (
        f"sync {synced['name']}: read {read} (filtered {synced['pushed']}); watermark {verb} "
        f"{synced['watermark_before']} -> {synced['watermark_after']}"
    )


def _write_results(args: argparse.Namespace, chunks: Any, rows: Iterable[Any] | None) -> bool:
    """Write ``--results`` and ``--rows``: each that can be written is, complete; one line
    on stderr for each that cannot. A first SIGINT or SIGTERM meanwhile waits for them to be
    complete, then ends the program (130 / 143); a second ends it at once. True when all
    were written."""
    ok = True
    with signals_held() as held:
        for path, frames in (
            (args.results, None if chunks is None else [chunks]),
            (args.rows, rows),
        ):
            if path is None or frames is None:
                continue
            try:
                write_frames(frames, path)
            except StorageError as exc:
                print(f"error: {exc}", file=sys.stderr)
                ok = False
    if held:
        raise Signalled(held[0])
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["sandbox"]:
        # a separate program with its own options, loaded only when asked for
        from .._sandbox import main as sandbox_main  # noqa: PLC0415

        return int(sandbox_main(args_list[1:]))
    args = build_parser().parse_args(args_list)
    if args.verbose and args.quiet:
        print("churn-connector: error: -v and -q contradict each other", file=sys.stderr)
        return ExitCode.STOPPED
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    elif args.quiet:
        logging.basicConfig(level=logging.ERROR)
    try:
        with command_line():  # messages name options by their flags
            if args.command == "validate":
                return run_validate(args)
            if args.command == "send":
                return _send(args)
            if args.command == "ledger":
                return ledger_command(args, lambda text: _say(args, text))
            if args.command == "resend":
                return run_resend(args)
            if args.command == "track":
                return run_track(args)
            if args.command == "plan":
                return run_plan(args)
            if args.command == "runs":
                return run_runs(args)
            # the demo starts a sandbox: loaded only when asked for
            demo = importlib.import_module("churn_connector._cli.demo")
            return int(demo.run_demo(args.out))
    except Interrupted as exc:
        print(exc.message, file=sys.stderr)
        return ExitCode.interrupted(exc.signal or signal.SIGINT)
    except ChurnConnectorError as exc:
        # one line: a reader's message may quote several lines of the file
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return ExitCode.STOPPED
    except Signalled as exc:
        print("interrupted: the result files were completed first", file=sys.stderr)
        return ExitCode.interrupted(exc.signum)
    except (KeyboardInterrupt, Terminated) as exc:
        # a signal outside a send (reading, validating, before the send): stop, quietly
        return ExitCode.interrupted(signal_of(exc) or signal.SIGINT)


def run(owned: Collection[int] | None = None) -> int:
    """The ``churn-connector`` program: :func:`main` in a process of its own.

    The program owns its process, so SIGTERM (``kill``, ``docker stop``) stops it the way
    Ctrl-C does, wherever it lands: in a send (its accounting written), or before or after
    one (exit 143, no traceback). ``owned``: the signals the console script's entry module
    (``churn_connector_cli``) took while the package loaded, handed over; by default, those
    still at Python's defaults."""
    _use_a_lean_arrow_pool()
    _few_malloc_arenas()
    if owned is None:
        owned = [
            signum
            for signum, default in (
                (signal.SIGINT, signal.default_int_handler),
                (signal.SIGTERM, signal.SIG_DFL),
            )
            if signal.getsignal(signum) is default
        ]
    if signal.SIGINT in owned:
        signal.signal(signal.SIGINT, _first_ctrl_c)
    if signal.SIGTERM in owned:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return main()
    except (KeyboardInterrupt, Terminated) as exc:  # as main returns, or parsing arguments
        return ExitCode.interrupted(signal_of(exc) or signal.SIGINT)


def _terminated(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM: like the first Ctrl-C; a second signal ends the process at once."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    raise Terminated(signum)


def _first_ctrl_c(signum: int, frame: FrameType | None) -> NoReturn:
    """Ctrl-C stops the send and its accounting is written; a second one ends the process.

    The program owns its process, so after the first the default action is put back: a
    second Ctrl-C (while results are written, or as the interpreter shuts down) ends it at
    once, without a traceback from whatever code it lands in.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    raise KeyboardInterrupt


def _few_malloc_arenas() -> None:
    """glibc: two malloc arenas for the process's threads, unless MALLOC_ARENA_MAX says.

    glibc gives threads up to 8 arenas a core; request bodies (~110 KB for 500 events) are
    built and freed on 16 sender threads, and their arenas fragmented as the send went on:
    a real 10M-row send peaked at 497 MiB, ~416 with two. The threads hold the GIL while
    they allocate, so they seldom wait for an arena. Process-wide, so only the program sets
    it, never the library.
    """
    if os.environ.get("MALLOC_ARENA_MAX"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc's (musl's does nothing)
    except (OSError, AttributeError):  # no such C library call (macOS, Windows)
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_ARENA_MAX, 2)


_M_ARENA_MAX = -8  # malloc.h


def _use_a_lean_arrow_pool() -> None:
    """Arrow's jemalloc pool, where pyarrow has one, unless ARROW_DEFAULT_MEMORY_POOL says.

    pyarrow's default pool (mimalloc on Linux) keeps memory that the reader's batches freed,
    so a long send grew; jemalloc hands it back: a 3M-row Parquet dry run peaked ~80 MB
    lower (benchmarks/, "memory"). The pool is process-wide, so only the program sets it,
    never the library: in a notebook or an Airflow worker the process is the user's.
    """
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    try:
        pool = pyarrow.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without it (Windows wheels)
        return
    pyarrow.set_memory_pool(pool)
