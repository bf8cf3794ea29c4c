"""``churn-connector track``: one event from a script, or NDJSON events through a tracker.

    churn-connector track EVENT_TYPE --user ID [--property KEY=VALUE ...] [--properties JSON]
                          [--context JSON] [--occurred-at TIME] [--message-id ID]
    churn-connector track --ndjson FILE|-

Prints the message id of each delivered event, one per line. Exit codes as for ``send``:
0 delivered; 1 invalid (the reason on stderr; nothing of it sent); 2 not delivered; 3 no key
or a refused key, the API unreachable, a usage error. A property given twice is invalid, as
a key named twice in a file's JSON is (``repeated_key``). An NDJSON file is a batch that may
be run again after an exit 1 or 2: a line with neither ``occurred_at`` nor ``message_id``
(which would get the moment of sending and a random id, another event each run) is invalid.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from .._client import Client
from .._core import (
    ChurnConnectorError,
    ClientConfig,
    ConfigurationError,
    DataValidationError,
    DeliveryError,
    ExitCode,
    InputError,
    TransportError,
)
from .._json import repeat_in, repeated_text_key
from .._read import repeat_of
from .._track import TrackHandle, planned
from .._validate import TrackingPlan
from .flags import add_client_arguments, add_event_flags, client_options

__all__ = ["add_track_parser", "run_track"]

# the keys of one NDJSON line: Client.track's arguments
_FIELDS = ("external_user_id", "event_type", "occurred_at", "properties", "context", "message_id")


def add_track_parser(sub: Any, add_verbosity: Any) -> None:
    """The ``track`` subcommand, on the main parser's subparsers."""
    track = sub.add_parser(
        "track",
        help="send one event now (or NDJSON events through a tracker)",
        description="Send one event now, or the events of an NDJSON file (one object per "
        "line with external_user_id, event_type, occurred_at or message_id or both, and "
        "optionally properties, context; a line with neither occurred_at nor message_id is "
        "refused, so running the file again stores nothing twice). A property given twice "
        "(--property, --properties) is refused. Prints the message id of each delivered event.",
    )
    add_verbosity(track, argparse.SUPPRESS)
    track.add_argument("event_type", nargs="?", metavar="EVENT_TYPE", help="e.g. signup")
    track.add_argument("--user", metavar="ID", help="the external_user_id")
    track.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property as text; KEY:=JSON for a typed value (amount:=19.9, paid:=true); "
        "repeatable",
    )
    track.add_argument("--properties", metavar="JSON", help="the properties as a JSON object")
    track.add_argument("--context", metavar="JSON", help="the context as a JSON object")
    track.add_argument(
        "--occurred-at",
        metavar="TIME",
        help="when it happened, with its offset (2026-11-20T09:30:00+01:00); default: now",
    )
    track.add_argument(
        "--message-id", metavar="ID", help="your own id for it (a webhook's event id)"
    )
    track.add_argument("--ndjson", metavar="FILE", help="send the events of FILE (- for stdin)")
    add_event_flags(track, ("naive_timezone", "namespace", "plan"))
    add_client_arguments(track)  # --base-url, --deadline, timeouts, retries: as send takes them


def _properties(args: argparse.Namespace) -> dict[str, Any]:
    """The properties of ``--properties`` and every ``--property``; a key given twice is
    refused (check ``repeated_key``), never read last-one-wins."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}  # key -> the option that gave it, for the message
    if args.properties is not None:
        parsed = _json(args.properties, "--properties", "properties")
        if not isinstance(parsed, dict):
            raise ConfigurationError("--properties must be a JSON object")
        out.update(parsed)
        given.update(dict.fromkeys(parsed, "--properties"))
    for item in args.property:
        typed = ":=" in item.split("=", 1)[0] + "="
        key, _, value = item.partition(":=" if typed else "=")
        if not key or (not typed and "=" not in item):
            raise ConfigurationError(f"--property {item!r}: write KEY=VALUE or KEY:=JSON")
        if key in given:
            raise _repeated(key, given[key], f"--property {item}")
        given[key] = f"--property {item}"
        out[key] = _json(value, f"--property {key}", f"properties.{key}") if typed else value
    return out


def _repeated(key: str, first: str, second: str) -> DataValidationError:
    """A property given twice on the command line: which value is meant is a guess."""
    return DataValidationError(
        f"the event is invalid and was not sent: repeated_key: properties: the key {key!r} "
        f"is given twice ({first!r} and {second!r}): which value is meant is a guess; keep "
        "the key once",
        n_invalid=1,
        n_rows=1,
        checks=("repeated_key",),
    )


def _json(text: str, where: str, path: str) -> Any:
    """The JSON value of an option; a text that names a key twice in one object makes the
    event invalid (check ``repeated_key``, as for the same text in a file)."""
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigurationError(f"{where}: not JSON ({exc})") from None
    found = repeat_in(text, parsed)
    if found is not None:
        reason = repeated_text_key(path, found.where, found.key)
        raise DataValidationError(
            f"the event is invalid and was not sent: repeated_key: {where}: {reason}",
            n_invalid=1,
            n_rows=1,
            checks=("repeated_key",),
        )
    return parsed


def run_track(args: argparse.Namespace) -> int:
    """Run ``churn-connector track``; its exit code."""
    single = args.event_type is not None or args.user is not None
    if args.ndjson is not None and single:
        raise ConfigurationError("give EVENT_TYPE --user ID, or --ndjson FILE, not both")
    if args.ndjson is None and (args.event_type is None or args.user is None):
        raise ConfigurationError("give EVENT_TYPE and --user ID (or --ndjson FILE)")
    client = Client(config=ClientConfig.create(api_key=None, **client_options(args)))
    options = {"naive_timezone": args.naive_timezone, "namespace": args.namespace}
    plan = planned(args.plan)  # read once, before anything is sent
    if args.ndjson is not None:
        return _ndjson(client, args, options, plan)
    try:
        context = None if args.context is None else _json(args.context, "--context", "context")
        result = client.track(
            args.user,
            args.event_type,
            occurred_at=args.occurred_at,
            properties=_properties(args),
            context=context,
            message_id=args.message_id,
            plan=plan,
            **options,
        )
    except DataValidationError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return ExitCode.INVALID
    except DeliveryError as exc:
        print(f"not delivered: {exc}", file=sys.stderr)
        return ExitCode.UNDELIVERED
    finally:
        client.close()
    print(result.message_id)
    return ExitCode.OK


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """The non-blank lines of ``path`` (``-``: stdin), numbered; the file is opened here, so
    a missing one is an InputError before anything is tracked."""
    stream: IO[str]
    try:
        stream = sys.stdin if path == "-" else Path(path).open(encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"cannot read --ndjson {path}: {reason}", path=path) from None
    return _numbered(stream)


def _numbered(stream: IO[str]) -> Iterator[tuple[int, str]]:
    try:
        for number, line in enumerate(stream, 1):
            if line.strip():
                yield number, line
    finally:
        if stream is not sys.stdin:
            stream.close()


def _ndjson(
    client: Client, args: argparse.Namespace, options: dict[str, Any], plan: TrackingPlan | None
) -> int:
    code = ExitCode.OK
    handles: list[TrackHandle] = []
    tracker = client.tracker(plan=plan)
    try:
        for number, line in _lines(args.ndjson):
            try:
                handles.append(tracker.track(**_event(line), **options))
            except (DataValidationError, ValueError) as exc:
                print(f"line {number}: invalid: {exc}", file=sys.stderr)
                code = max(code, ExitCode.INVALID)
    finally:
        tracker.close()
    for handle in handles:
        try:
            print(handle.result(timeout=0).message_id)
        except (TransportError, TimeoutError) as exc:
            # a refused key or an unreachable API: nothing more can be sent (exit 3)
            stopped = isinstance(exc, TransportError)
            code = max(code, ExitCode.STOPPED if stopped else ExitCode.UNDELIVERED)
            print(f"not delivered: {handle.message_id}: {exc}", file=sys.stderr)
        except ChurnConnectorError as exc:
            code = max(code, ExitCode.UNDELIVERED)
            print(f"not delivered: {handle.message_id}: {exc}", file=sys.stderr)
    return int(code)


def _event(line: str) -> dict[str, Any]:
    """One NDJSON line as ``track``'s keywords; ValueError names what is wrong."""
    try:
        parsed = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise ValueError("each line must be one JSON object (an event)")
    repeat = repeat_of(line, parsed)
    if repeat is not None:  # as a file's line: refused by name, never read last-one-wins
        raise ValueError(f"repeated_key: {repeat[2]}")
    unknown = sorted(set(parsed) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}: an event has {', '.join(_FIELDS)}")
    missing = [k for k in ("external_user_id", "event_type") if k not in parsed]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if parsed.get("occurred_at") is None and parsed.get("message_id") is None:
        # the file is a batch, run again after an exit 1 or 2: such an event would get the
        # moment of sending and a random id each run, and be stored once per run
        raise ValueError(
            "the line has neither occurred_at nor message_id: it would be sent with the time "
            "of sending and a random id, so running the file again would store it twice; "
            "give the line an occurred_at (when it happened) or a message_id"
        )
    return parsed
