"""Secrets given with a ledger stay secret: libpq's ``key=value`` settings are understood as
PostgreSQL (never a SQLite file named after them, password and all), ``sslpassword`` is
redacted like ``password``, and a password given as ``cc.Secret`` sits in no local of a
``LedgerError``'s traceback, where renderers that show locals would print it."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import MakeEvents
from tests.ledger.servers import PG_PASSWORD, PG_USER, PostgresServer, free_port

CANARY = "pw_CANARY_5e0c1a"


def _texts(value: object, depth: int = 0) -> list[str]:
    """What a locals-showing renderer prints of ``value``: its repr, and its items'."""
    out = [repr(value)]
    if depth < 3 and isinstance(value, list | tuple | set | dict):
        items = list(value.items()) if isinstance(value, dict) else list(value)
        for item in items:
            out += _texts(item, depth + 1)
    return out


def _frames(exc: BaseException) -> list[types.FrameType]:
    found, seen = [], set()
    pending: list[BaseException | None] = [exc]
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        tb = error.__traceback__
        while tb is not None:
            found.append(tb.tb_frame)
            tb = tb.tb_next
        pending.append(error.__cause__)
        if not error.__suppress_context__:
            pending.append(error.__context__)
    return found


@pytest.mark.e2e
def test_libpq_settings_on_the_command_line_are_a_postgresql_ledger(
    postgres: PostgresServer,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
) -> None:
    export = tmp_path / "events.parquet"
    make_events(now, n=20).to_parquet(export)
    schema = postgres.fresh_schema()
    settings = (
        f"host=127.0.0.1 port={postgres.port} dbname=ledger user={PG_USER} "
        f"options='-csearch_path={schema}'"
    )
    env = {**os.environ, "CHURN_API_KEY": sandbox.api_key, "PGPASSWORD": PG_PASSWORD}
    argv = [sys.executable, "-m", "churn_connector._cli", "send", "events", str(export),
            "--base-url", sandbox.base_url, "--ledger", settings, "-q"]  # fmt: skip
    for expected in (0, 0):
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        assert done.returncode == expected, done.stderr
    assert len(sandbox.requests_log()) == 1  # the second run skipped every row
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.parquet"]  # no SQLite file


@pytest.mark.e2e
def test_a_password_in_libpq_settings_is_refused_on_the_command_line_unshown(
    tmp_path: Path, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    export = tmp_path / "events.parquet"
    make_events(now, n=5).to_parquet(export)
    settings = f"host=127.0.0.1 dbname=ledger user=churn password={CANARY}"
    done = subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "send", "events", str(export),
         "--dry-run", "--ledger", settings],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert CANARY not in done.stdout + done.stderr
    assert "password=***" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.parquet"]


def test_sslpassword_is_redacted_like_password() -> None:
    for location in (
        f"postgresql://churn@127.0.0.1:{free_port()}/ledger?sslpassword={CANARY}",
        f"host=127.0.0.1 port={free_port()} dbname=ledger user=churn sslpassword={CANARY}",
    ):
        with pytest.raises(cc.LedgerError) as info:
            cc.Ledger(location)
        assert CANARY not in str(info.value)
        assert "sslpassword=***" in str(info.value)


def test_a_secret_password_is_in_no_local_of_a_ledger_errors_traceback() -> None:
    url = f"postgresql://churn@127.0.0.1:{free_port()}/ledger"
    with pytest.raises(cc.LedgerError) as info:
        cc.Ledger(url, password=cc.Secret(CANARY))
    frames = _frames(info.value)
    assert frames
    for frame in frames:
        for name, value in frame.f_locals.items():
            for text in _texts(value):
                assert CANARY not in text, (frame.f_code.co_name, name)
