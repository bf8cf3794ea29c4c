"""Instructions per event: valgrind's callgrind counts them in the CLI's dry run.

    .venv/bin/python benchmarks/callgrind.py [--kinds parquet csv] [--repeats 3]
    make bench BENCH_ARGS="--only callgrind"     # the same, as a section of the suite

CPU seconds move with the machine's load: one ``make bench`` row (client CPU per event,
Parquet) read 3.8, 8.6 and 6.1 µs in three runs of one afternoon on this 2-core machine
shared with other jobs, so they cannot compare two revisions. The number of instructions
the program executes does not move with the load. ``valgrind --tool=callgrind`` counts them
(``Ir``, instructions read, every thread included) for ``churn-connector send events FILE
--dry-run`` on a ``--big`` (200k) and a ``--small`` (20k) row export of the same shape; the
marginal count per event, start-up excluded, is

    (Ir(200k rows) - Ir(20k rows)) / 180k

Measured before this script existed: 25,936 / 25,926 / 25,944 on Parquet in three runs
(±0.04%, whatever the load). The small run is 20k rows, not 1k or 2k as for CPU seconds: a
20k - 2k difference is not steady, start-up's own count varies by more than 18k events'
worth. ``PYTHONHASHSEED=0`` keeps set and dict orders, and so the work, the same.

A dry run builds every request body and sends none, so no receiver is involved; each run
must exit 0 and report every row ``would_send`` (checked from its summary line). Under
valgrind a program runs ~50x slower: 200k rows take ~2-3 min here, so the two runs of a pair
run side by side (two cores). Without valgrind on the machine (``apt-get install valgrind``,
a Debian package), the section says so and skips itself.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exports
from harness import HERE, ROOT, Report, Row, child_env, cli, user_python

# valgrind's virtual CPU has no SHA instructions: both programs hash in software there, the
# floor with Rust's portable SHA-256 (~13k instructions an event), which on the real CPU
# costs a tenth of that; so the floor's count, and our ratio to it, are steady but say
# little about time. Opt-in (--floor); the ratio in CPU seconds is in the cpu section.
FLOOR_NOTE = "SHA-256 in software under valgrind (see callgrind.py); "
RUN_TIMEOUT = 1_800.0  # seconds for one run under valgrind (200k rows take ~3 min here)
_SUMMARY = re.compile(rb"^summary:\s*(\d+)", re.MULTILINE)
_WOULD_SEND = re.compile(r"(\d+) rows -> sent 0, skipped 0, invalid 0")


def valgrind() -> str | None:
    """The valgrind program, or None when the machine has none."""
    return shutil.which("valgrind")


def dry_run(who: str, path: Path, options: tuple[str, ...] = ()) -> list[str]:
    """The command of one dry run: ours (the CLI) or the floor's (floor.py)."""
    if who == "floor":
        return [user_python(), str(HERE / "floor.py"), str(path), "--dry-run"]
    return [cli(), "send", "events", str(path), "--dry-run", *options]


def instructions(
    path: Path, rows: int, options: tuple[str, ...] = (), who: str = "ours"
) -> tuple[int, str]:
    """(Ir of one dry run on ``path``, ours or the floor's; a problem or "")."""
    program = valgrind()
    assert program is not None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "callgrind.out")
        env = {**child_env(), "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            [
                program,
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--dump-instr=no",
                "--dump-line=no",
                *dry_run(who, path, options),
            ],
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        found = _SUMMARY.search(out.read_bytes()) if out.exists() else None
    if done.returncode != 0 or found is None:
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:300]
        return 0, f"exited {done.returncode}: {tail}"
    sent = _WOULD_SEND.search(done.stdout + done.stderr)
    if sent is None or int(sent.group(1)) != rows:
        return int(found.group(1)), f"the dry run did not build all {rows:,} rows"
    return int(found.group(1)), ""


def per_event(
    big: Path,
    big_n: int,
    small: Path,
    small_n: int,
    options: tuple[str, ...] = (),
    who: str = "ours",
) -> tuple[float | None, dict[str, Any]]:
    """One measurement: both runs side by side; (Ir per event or None, details)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        ran_big = pool.submit(instructions, big, big_n, options, who)
        ran_small = pool.submit(instructions, small, small_n, options, who)
        (ir_big, problem_big), (ir_small, problem_small) = ran_big.result(), ran_small.result()
    details = {"ir_big": ir_big, "ir_small": ir_small, "problems": [problem_big, problem_small]}
    if problem_big or problem_small:
        return None, details
    return (ir_big - ir_small) / (big_n - small_n), details


def section(
    report: Report,
    cache: Path,
    kinds: list[str],
    big_n: int = 200_000,
    small_n: int = 20_000,
    repeats: int = 3,
    *,
    floor: bool = False,
) -> None:
    """Ir per event for each kind of export, ``repeats`` times: median and spread; with
    ``floor``, the floor's too (see FLOOR_NOTE)."""
    if valgrind() is None:
        report.add(
            Row(
                "callgrind",
                "instructions per event (callgrind)",
                None,
                "",
                "skipped: valgrind is not installed (apt-get install valgrind)",
            )
        )
        return
    for kind in kinds:
        big, small = exports.export(cache, big_n, kind), exports.export(cache, small_n, kind)
        options = exports.FLAT_CSV_OPTIONS if kind == "csv-flat" else ()
        values: dict[str, list[float]] = {"ours": [], "floor": []}
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "floor": []}
        whos = ("ours", "floor") if floor else ("ours",)
        for rep in range(repeats):
            for who in whos:
                value, details = per_event(big, big_n, small, small_n, options, who)
                runs[who].append(details)
                if value is None:
                    problems = "; ".join(p for p in details["problems"] if p)
                    report.problem(f"callgrind {kind} {who} #{rep + 1}: {problems}")
                else:
                    values[who].append(value)
                print(
                    f"    callgrind {kind} {who} #{rep + 1}: {value}", file=sys.stderr, flush=True
                )
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        label = f"{kind}, {big_n // 1000}k vs {small_n // 1000}k rows"
        names = {"ours": "instructions per event, dry run", "floor": "floor's"}
        for who in whos:
            report.add(
                Row(
                    "callgrind",
                    f"{names[who]}, {label}",
                    statistics.median(values[who]) if values[who] else None,
                    "Ir/event",
                    _spread(values[who])
                    + (FLOOR_NOTE if who == "floor" else "")
                    + f"start-up and {small_n // 1000}k rows: "
                    f"{statistics.median(r['ir_small'] for r in runs[who]) / 1e9:.2f} G "
                    f"instructions; load {load}",
                    details={"values": values[who], "runs": runs[who]},
                )
            )
        if not floor:
            continue
        ratios = [o / f for o, f in zip(values["ours"], values["floor"], strict=False) if f]
        report.add(
            Row(
                "callgrind",
                f"ours / floor in instructions, {label}",
                statistics.median(ratios) if ratios else None,
                "x",
                "per repeat: " + ", ".join(f"{r:.3f}" for r in ratios),
                details={"ratios": ratios},
            )
        )


def _spread(values: list[float]) -> str:
    if not values:
        return ""
    middle = statistics.median(values)
    return (
        f"{len(values)} runs: {', '.join(f'{v:,.0f}' for v in values)} "
        f"(spread ±{(max(values) - min(values)) / 2 / middle:.2%}); "
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["parquet", "csv"], choices=exports.KINDS)
    parser.add_argument("--big", type=int, default=200_000)
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="the floor's count too")
    parser.add_argument("--cache", type=Path, default=HERE / ".cache")
    args = parser.parse_args(argv)
    report = Report()
    section(report, args.cache, args.kinds, args.big, args.small, args.repeats, floor=args.floor)
    for row in report.rows:
        if row.value is None:
            shown = "n/a"
        else:
            shown = f"{row.value:.3f} x" if row.unit == "x" else f"{row.value:,.0f} {row.unit}"
        print(f"{row.name}: {shown}\n    {row.note}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
