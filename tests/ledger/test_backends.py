"""One ledger API, chosen by the location: every backend skips what the API acknowledged,
re-sends only changed users, and stores keys and digests only."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._ledger import EXPORT_SCHEMA, backend_of
from churn_connector._ledger.objects import SEGMENT_SCHEMA, ObjectLedger
from churn_connector._ledger.postgres import PostgresLedger
from churn_connector._ledger.sqlite import SqliteLedger
from tests.ledger.servers import PG_PASSWORD, PostgresServer


def export(url: str) -> pa.Table:
    with cc.Ledger(url) as ledger:
        return pa.Table.from_batches(list(ledger.batches()), schema=EXPORT_SCHEMA)


@pytest.mark.parametrize(
    ("location", "backend"),
    [
        ("ledger.sqlite", SqliteLedger),
        ("sqlite:///tmp/ledger.sqlite", SqliteLedger),
        ("file:///tmp/ledger/", ObjectLedger),
        ("memory://ledger/", ObjectLedger),
        ("s3://bucket/prefix/", ObjectLedger),
        ("postgresql://churn@127.0.0.1:1/ledger", PostgresLedger),
        ("postgres://churn@127.0.0.1:1/ledger", PostgresLedger),
    ],
)
def test_the_location_chooses_the_backend(location: str, backend: type[cc.Ledger]) -> None:
    assert backend_of(location) is backend


def test_an_unknown_scheme_is_a_configuration_error_naming_the_known_ones() -> None:
    with pytest.raises(cc.ConfigurationError, match=r"unknown scheme 'ftp'.*postgresql://"):
        cc.Ledger("ftp://host/ledger")


@pytest.mark.parametrize(
    ("location", "library", "extra"),
    [
        ("postgresql://churn:secret@127.0.0.1/ledger", "psycopg", "postgres"),
        ("s3://bucket/prefix/", "fsspec", "s3"),
    ],
)
def test_a_missing_extra_is_a_configuration_error_naming_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, location: str, library: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, library, None)  # as if it were not installed
    for module in ("postgres", "objects"):
        monkeypatch.delitem(sys.modules, f"churn_connector._ledger.{module}", raising=False)
    with pytest.raises(cc.ConfigurationError) as info:
        cc.Ledger(location)
    assert f'pip install "churn-connector[{extra}]"' in str(info.value)
    assert "secret" not in str(info.value)


@pytest.mark.parametrize(
    ("location", "extra"), [("gs://bucket/prefix/", "gcs"), ("az://container/prefix/", "azure")]
)
def test_a_store_whose_fsspec_library_is_missing_names_its_own_extra(
    monkeypatch: pytest.MonkeyPatch, location: str, extra: str
) -> None:
    for library in ("gcsfs", "adlfs"):
        monkeypatch.setitem(sys.modules, library, None)  # as if it were not installed
    with pytest.raises(cc.ConfigurationError) as info:
        cc.Ledger(location)
    assert str(info.value).endswith(f'pip install "churn-connector[{extra}]"')


def test_a_rerun_with_any_ledger_sends_nothing_already_acknowledged(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp, ledger_url: str
) -> None:
    first = client.send_events(events, now=now, ledger=ledger_url, batch_size=4)
    assert first.counts["sent"] == len(events)
    again = client.send_events(events, now=now, ledger=ledger_url, batch_size=4)
    assert (again.counts["sent"], again.counts["skipped"]) == (0, len(events))
    assert set(again.rows["error"]) == {"already delivered (ledger)"}
    assert len(sandbox.requests_log()) == 3  # the first run's three requests only


def test_any_ledger_records_only_acknowledged_requests(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp, ledger_url: str
) -> None:
    client = cc.Client(
        sandbox.base_url, sandbox.api_key, max_concurrency=1, retry=cc.RetryPolicy(max_attempts=2)
    )
    sandbox.script_faults([cc.Fault("5xx")] * 2)  # the first batch fails for good
    first = client.send_events(events, now=now, ledger=ledger_url, batch_size=5)
    assert first.counts["failed"] == 5
    with cc.Ledger(ledger_url) as book:
        assert book.count("events") == 5
    again = client.send_events(events, now=now, ledger=ledger_url, batch_size=5)
    assert (again.counts["sent"], again.counts["skipped"]) == (5, 5)


def test_identify_with_any_ledger_sends_only_changed_users(
    client: cc.Client, sandbox: cc.Sandbox, ledger_url: str
) -> None:
    users = pd.DataFrame(
        {"external_user_id": ["a", "b", "c"], "traits.plan": ["pro", "free", "pro"]}
    )
    client.identify(users, ledger=ledger_url)
    users.loc[1, "traits.plan"] = "pro"
    again = client.identify(users, ledger=ledger_url)
    assert list(again.rows["status"]) == ["skipped", "sent", "skipped"]
    assert sandbox.stats()["identifies"] == 4


def test_any_ledger_sends_a_user_again_after_an_unknown_outcome(
    sandbox: cc.Sandbox, ledger_url: str
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, retry=cc.RetryPolicy(max_attempts=1))
    first = pd.DataFrame({"external_user_id": ["x"], "traits.plan": ["free"]})
    client.identify(first, ledger=ledger_url)
    sandbox.script_faults([cc.Fault("drop")])  # stored, but the response is lost
    changed = first.assign(**{"traits.plan": "pro"})
    assert client.identify(changed, ledger=ledger_url).counts["failed"] == 1
    # the old record was dropped before the new body went out: the old body is sent again
    again = client.identify(first, ledger=ledger_url)
    assert again.counts["sent"] == 1
    assert sandbox.users().iloc[0]["traits"] == {"plan": "free"}


def test_a_dry_run_consults_any_ledger_but_writes_nothing(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, ledger_url: str
) -> None:
    client.send_events(events.iloc[:4], now=now, ledger=ledger_url)
    before = export(ledger_url)
    dry = client.send_events(events, now=now, dry_run=True, ledger=ledger_url)
    assert (dry.counts["skipped"], dry.counts["would_send"]) == (4, 6)
    assert export(ledger_url).equals(before)


def test_a_dry_run_on_a_new_ledger_creates_nothing(
    client: cc.Client,
    events: pd.DataFrame,
    now: pd.Timestamp,
    tmp_path: Path,
    postgres: PostgresServer,
) -> None:
    schema = postgres.fresh_schema()
    folder = tmp_path / "segments"
    for url in (postgres.url(schema), folder.as_uri() + "/"):
        dry = client.send_events(events, now=now, dry_run=True, ledger=url)
        assert dry.counts["would_send"] == len(events)
    assert not folder.exists()
    import psycopg  # noqa: PLC0415 - the postgres extra

    with psycopg.connect(postgres.url(schema)) as conn:
        row = conn.execute("SELECT to_regclass('churn_ledger')").fetchone()
    assert row == (None,)


def test_a_ledger_of_any_backend_is_scoped_to_one_api_and_key(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, ledger_url: str
) -> None:
    client.send_events(events, now=now, ledger=ledger_url)
    with cc.Sandbox() as other:
        elsewhere = cc.Client(other.base_url, other.api_key)
        result = elsewhere.send_events(events, now=now, ledger=ledger_url)
    assert result.counts["sent"] == len(events)


def test_every_backend_stores_keys_digests_and_times_only(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, ledger_url: str
) -> None:
    result = client.send_events(events, now=now, ledger=ledger_url)
    exported = export(ledger_url)
    assert exported.schema == EXPORT_SCHEMA
    table = exported.to_pandas()
    assert set(table["kind"]) == {"events", "event_keys"}
    acknowledged = table[table["kind"] == "events"]
    assert sorted(acknowledged["key"]) == sorted(result.rows["message_id"])
    # the re-id guard's: a digest of each natural key, with the id it was sent under
    natural = table[table["kind"] == "event_keys"]
    assert natural["key"].str.fullmatch("[0-9a-f]{32}").all()
    assert sorted(d.split("|")[0] for d in natural["digest"]) == sorted(result.rows["message_id"])
    cells = {str(v) for column in ("scope", "key", "digest") for v in table[column]}
    assert not any("user_" in c or "page_view" in c for c in cells)


def test_object_storage_segments_hold_the_segment_columns_only(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "segments"
    client.send_events(events, now=now, ledger=folder.as_uri() + "/")
    segments = sorted(folder.glob("*.parquet"))
    assert segments
    assert all(pq.read_schema(path).names == SEGMENT_SCHEMA.names for path in segments)
    assert not list(folder.glob(".*"))  # no file written aside was left behind


def test_a_postgres_ledger_takes_its_password_from_pgpassword(
    client: cc.Client,
    events: pd.DataFrame,
    now: pd.Timestamp,
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = postgres.url(postgres.fresh_schema(), password=False)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    assert client.send_events(events, now=now, ledger=url).counts["sent"] == len(events)
    assert client.send_events(events, now=now, ledger=url).counts["skipped"] == len(events)
