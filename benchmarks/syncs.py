"""The ``sync`` section: an incremental sync from a PostgreSQL table, against its floor.

A PostgreSQL server is started as the tests start theirs (``tests/ledger/servers.py``) and
holds ``events`` with ``--sync-rows`` old rows and ``--sync-new`` new ones (ids ``0 ..``; an
index on ``id``, the cursor). Each repeat, three runs of the CLI (``churn-connector send
events --sql ... --connection URL``, start-up included, the password only in PGPASSWORD), at
the receiver's 50 ms:

* **incremental**: ``--cursor id --ledger FILE --sync-name bench`` on a fresh SQLite ledger
  whose watermark is set to the last old row (``ledger syncs --set``): it reads and sends the
  new rows alone, then moves the watermark;
* **floor**: the same query with ``WHERE id >= <first new id>`` written into it, no ledger,
  no cursor: the new rows alone, by hand. Our ratio to it is the sync's cost (goal <= 2x);
* **no cursor**: the whole table, no ledger: what a run reads and sends without a sync; its
  peak RSS is the memory of a query send of that many rows (goal <= 400 MB at 10M).

    .venv/bin/python benchmarks/bench.py --only sync [--sync-rows 10000000] [--sync-new 10000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness import KEY, ROOT, Child, Report, Row, check_ours, cli, measure, receiver, run_child

import churn_connector as cc
from churn_connector._ledger import scope_of

__all__ = ["sync_section"]

QUERY = (
    "SELECT {id}uid AS external_user_id, et AS event_type, ts AS occurred_at, "
    'plan AS "properties.plan" FROM events'
)


def _load(server: object, schema: str, rows: int) -> float:
    """``rows`` events in ``schema.events``, made by the server itself; seconds taken."""
    import psycopg  # noqa: PLC0415 - the postgres extra (dev)

    started = time.perf_counter()
    with psycopg.connect(server.url(schema), autocommit=True) as conn:  # type: ignore[attr-defined]
        conn.execute(
            "CREATE TABLE events (id BIGINT NOT NULL, uid TEXT, et TEXT, ts TIMESTAMPTZ, plan TEXT)"
        )
        # timestamps 10 ms apart, ending well in the past and within the API's 30 days
        conn.execute(
            "INSERT INTO events SELECT g, 'user_' || (g % 50000), 'login', "  # noqa: S608 - ours
            "now() - interval '3 days' + g * interval '10 milliseconds', "
            "CASE WHEN g % 3 = 0 THEN 'pro' ELSE 'free' END "
            f"FROM generate_series(0, {int(rows) - 1}) AS g"
        )
        conn.execute("CREATE INDEX events_id ON events (id)")
        conn.execute("VACUUM ANALYZE events")
    return time.perf_counter() - started


TIME = Path("/usr/bin/time")  # GNU time: its -v report's peak RSS beside ours, when installed


def _send(
    url: str, connection: str, query: str, *options: str, env: dict[str, str], timed: bool = False
) -> Child:
    command = [cli(), "send", "events", "--sql", query, "--connection", connection,
               "--base-url", url, *options]  # fmt: skip
    if timed and TIME.exists():
        command = [str(TIME), "-v", *command]
    return run_child(command, env=env)


def time_maxrss_mib(child: Child) -> float | None:
    """The peak RSS ``/usr/bin/time -v`` reported, in MiB."""
    for line in child.stderr.splitlines():
        if "Maximum resident set size (kbytes)" in line:
            return int(line.rsplit(":", 1)[1]) / 1024
    return None


def sync_section(args: argparse.Namespace, report: Report) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.ledger.servers import (  # noqa: PLC0415 - only this section
        PG_PASSWORD,
        PostgresServer,
        ServerMissing,
    )

    old, new = args.sync_rows, args.sync_new
    total = old + new
    try:
        server = PostgresServer()
    except ServerMissing as exc:
        report.problem(f"sync: {exc}")
        return
    env = {"PGPASSWORD": PG_PASSWORD}
    walls: dict[str, list[float]] = {"incremental": [], "floor": [], "no cursor": []}
    rss: list[float] = []
    time_rss: list[float] = []  # /usr/bin/time -v's figure of the same runs
    try:
        schema = server.fresh_schema()
        print(f"sync: loading {total:,} rows into PostgreSQL ...", file=sys.stderr, flush=True)
        loaded = _load(server, schema, total)
        connection = server.url(schema, password=False)
        with tempfile.TemporaryDirectory() as tmp, receiver(0.05) as sink:
            # the base URL as the CLI's scope has it
            scope = scope_of(cc.Client(sink.url, cc.Secret(KEY)).config.base_url, cc.Secret(KEY))
            for repeat in range(args.repeats):
                ledger = str(Path(tmp, f"ledger-{repeat}.sqlite"))
                done = run_child(
                    [cli(), "ledger", "syncs", ledger, "--set", f"bench={old - 1}", "--scope",
                     scope]
                )  # fmt: skip
                if done.returncode:
                    report.problem(
                        f"sync: ledger syncs --set exited {done.returncode}: {done.tail()}"
                    )
                    return
                runs = {
                    "incremental": (
                        QUERY.format(id="id, "),
                        ("--cursor", "id", "--ledger", ledger, "--sync-name", "bench"),
                        new,
                    ),
                    "floor": (QUERY.format(id="") + f" WHERE id >= {old}", (), new),
                }
                if repeat == 0 or args.sync_full_repeats:
                    runs["no cursor"] = (QUERY.format(id=""), (), total)
                for name, (query, options, expected) in runs.items():
                    print(f"sync: {name} ...", file=sys.stderr, flush=True)
                    child, arrived = measure(
                        sink,
                        lambda q=query, o=options, n=name: _send(
                            sink.url, connection, q, *o, env=env, timed=n == "no cursor"
                        ),
                    )
                    if check_ours(report, f"sync {name}", child, arrived, expected):
                        walls[name].append(child.wall_s)
                        if name == "no cursor":
                            rss.append(child.maxrss_mib)
                            timed = time_maxrss_mib(child)
                            if timed is not None:
                                time_rss.append(timed)
    finally:
        server.close()
    medians = {k: statistics.median(v) for k, v in walls.items() if v}
    for name, what in (
        ("incremental", f"incremental sync: {new:,} new rows of {total:,} (--cursor, ledger)"),
        ("floor", f"floor: a query selecting only the {new:,} new rows (no ledger, no cursor)"),
        ("no cursor", f"no cursor: the whole {total:,}-row table, no ledger"),
    ):
        if name in medians:
            report.add(
                Row(
                    "sync",
                    f"{what}, CLI wall time, start-up included",
                    medians[name],
                    "s",
                    f"median of {len(walls[name])}: "
                    + ", ".join(f"{w:.2f}" for w in walls[name])
                    + f"; table loaded in {loaded:.0f} s",
                    details={"walls_s": walls[name], "rows": total},
                )
            )
    if "incremental" in medians and "floor" in medians:
        report.add(
            Row(
                "sync",
                "incremental sync / floor (goal <= 2x)",
                medians["incremental"] / medians["floor"],
                "x",
                "medians above",
            )
        )
    if "incremental" in medians and "no cursor" in medians:
        report.add(
            Row(
                "sync",
                "no cursor / incremental sync",
                medians["no cursor"] / medians["incremental"],
                "x",
                "what the cursor saves",
            )
        )
    if rss:
        report.add(
            Row(
                "sync",
                f"peak RSS, no-cursor query send of {total:,} rows (goal <= 400 MB at 10M)",
                max(rss),
                "MiB",
                "the CLI's own ru_maxrss (os.wait4)"
                + (f"; /usr/bin/time -v: {max(time_rss):.0f} MiB" if time_rss else ""),
                details={"rss_mib": rss, "time_v_rss_mib": time_rss},
            )
        )
