"""``churn-connector validate`` as a gate: the exit-code contract, the reports it writes, and
``--passed`` + ``--quarantine`` splitting the input exactly."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import hypothesis.strategies as st
import jsonschema
import junitparser
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from churn_connector._cli import main
from churn_connector._validate.document import schema


def _csv(path: Path, now: pd.Timestamp, n: int, bad: int) -> Path:
    t = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = ["external_user_id,event_type,occurred_at"]
    lines += [f"u{i},{'Bad Type' if i < bad else 'login'},{t}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("bad", "flags", "code"),
    [
        (0, [], 0),
        (1, [], 1),  # today's contract: any invalid row exits 1
        (2, ["--max-invalid", "2"], 0),
        (3, ["--max-invalid", "2"], 1),
        (10, ["--max-invalid", "10%"], 0),
        (11, ["--max-invalid", "10%"], 1),
        (3, ["--warn-on", "event_type_pattern"], 0),
        (3, ["--max-invalid", "2", "--warn-invalid", "1"], 1),
    ],
)
def test_the_exit_code_is_the_gates(
    now: pd.Timestamp, tmp_path: Path, bad: int, flags: list[str], code: int
) -> None:
    path = _csv(tmp_path / "e.csv", now, 100, bad)
    assert main(["validate", "events", str(path), "-q", *flags]) == code


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--max-invalid", "lots"], "argument --max-invalid"),
        (["--warn-on", "event_type_patern"], "did you mean event_type_pattern"),
        (["--warn-on", "phone_e164"], "a check of identities, not of events"),
        (["--format", "json", "--format", "github"], "two report formats"),
    ],
)
def test_a_bad_gate_option_exits_3_and_says_why(
    now: pd.Timestamp,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    said: str,
) -> None:
    path = _csv(tmp_path / "e.csv", now, 5, 1)
    assert _exit_code(["validate", "events", str(path), *flags]) == 3
    assert said in capsys.readouterr().err


def _exit_code(argv: list[str]) -> int | str | None:
    """main's return value, or the code argparse exits with on a usage error."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_an_unreadable_input_exits_3_never_0(tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    assert main(["validate", "events", str(broken), "--max-invalid", "100%"]) == 3


def test_format_json_prints_the_report_alone_on_stdout(
    now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path / "e.csv", now, 10, 2)
    assert main(["validate", "events", str(path), "--format", "json"]) == 1
    out = capsys.readouterr()
    doc = json.loads(out.out)
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    assert doc["verdict"]["status"] == "fail"
    assert [f["line"] for f in doc["failures"]] == [2, 3]
    assert "10 rows, 8 valid, 2 invalid" in out.err  # the summary goes to stderr


def test_format_csv_and_json_together_read_a_part_without_a_suffix_and_report_json(
    now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path / "0000_part_00", now, 4, 0)
    assert main(["validate", "events", str(path), "--format", "csv", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["rows"] == 4


def test_the_report_files_are_written(now: pd.Timestamp, tmp_path: Path) -> None:
    path = _csv(tmp_path / "e.csv", now, 10, 2)
    out = tmp_path / "out"
    code = main(
        [
            "validate",
            "events",
            str(path),
            "--json",
            str(out / "report.json"),
            "--junit",
            str(out / "junit.xml"),
            "--max-invalid",
            "20%",
            "-q",
        ]
    )
    assert code == 0
    assert json.loads((out / "report.json").read_text())["verdict"]["status"] == "warn"
    xml = junitparser.JUnitXml.fromfile(str(out / "junit.xml"))
    assert sum(s.failures for s in xml) == 0  # within the threshold


def test_format_github_prints_annotations(
    now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path / "e.csv", now, 3, 1)
    assert main(["validate", "events", str(path), "--format", "github", "-q"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"::error file={path},line=2,title=event_type_pattern::")
    assert lines[-1].startswith("::error title=churn-connector validate (fail)::")


# --------------------------------------------------------------------------- the split

_TIME = "2026-11-20T09:30:00Z"


def _cells() -> st.SearchStrategy[tuple[str, str, str]]:
    user = st.sampled_from(["u1", "u2", " ", "", "42", "é"])
    kind = st.sampled_from(["login", "add_to_cart", "Add To Cart", "", "a,b", 'say "hi"'])
    when = st.sampled_from(["NOW", "NOW", "2026-11-20 09:30:00", "yesterday", ""])
    return st.tuples(user, kind, when)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rows=st.lists(_cells(), min_size=1, max_size=30))
def test_passed_and_quarantine_partition_the_input_exactly(
    now: pd.Timestamp, tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, str, str]]
) -> None:
    folder = tmp_path_factory.mktemp("split")
    t = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    table = pd.DataFrame(rows, columns=["external_user_id", "event_type", "occurred_at"])
    table["occurred_at"] = table["occurred_at"].replace("NOW", t)
    source = folder / "in.csv"
    table.to_csv(source, index=False)
    passed, quarantine = folder / "passed.csv", folder / "quarantine.csv"
    main(
        [
            "validate",
            "events",
            str(source),
            "--passed",
            str(passed),
            "--quarantine",
            str(quarantine),
            "-q",
        ]
    )

    def read(path: Path) -> pd.DataFrame:
        return pd.read_csv(path, dtype=str, keep_default_na=False)

    original, good, bad = read(source), read(passed), read(quarantine)
    assert list(good.columns) == list(original.columns)  # as read: ready to send
    assert list(bad.columns) == ["row", *original.columns, "failed_checks", "reasons"]
    as_rows = collections.Counter(map(tuple, original.itertuples(index=False)))
    split = collections.Counter(map(tuple, good.itertuples(index=False)))
    split.update(map(tuple, bad[list(original.columns)].itertuples(index=False)))
    assert split == as_rows  # no row lost, none doubled
    assert (bad["failed_checks"] != "").all()
    assert len(set(bad["row"])) == len(bad)  # each quarantined line once
    assert set(bad["row"].astype(int)) <= set(range(2, len(original) + 2))


def test_the_split_in_parquet_keeps_the_rows_as_read(now: pd.Timestamp, tmp_path: Path) -> None:
    events = pd.DataFrame(
        {
            "external_user_id": pd.array([1, 2, 3], dtype="Int64"),
            "event_type": ["login", "Bad", "login"],
            "occurred_at": [now, now, now],
            "properties.n": [1.5, None, 2.0],
        }
    )
    source = tmp_path / "in.parquet"
    events.to_parquet(source)
    passed, quarantine = tmp_path / "passed.parquet", tmp_path / "q.parquet"
    argv = ["validate", "events", str(source), "--passed", str(passed)]
    assert main([*argv, "--quarantine", str(quarantine), "-q"]) == 1
    good, bad = pd.read_parquet(passed), pd.read_parquet(quarantine)
    pd.testing.assert_frame_equal(good, events.iloc[[0, 2]].reset_index(drop=True))
    assert list(bad["row"]) == [1]
    assert list(bad["failed_checks"]) == ["event_type_pattern"]
