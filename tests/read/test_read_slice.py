"""What a reader says of its rows travels beside the frame, in its slice (``_read.read_slice``),
never in ``DataFrame.attrs``: each step that changes the frame (renames, Hive columns, a
slice split in two) keeps each problem on its own row."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import churn_connector as cc
from churn_connector._read import ReadSpec, Slice, iter_slices

NOW = pd.Timestamp("2026-11-20T12:00:00Z")
CSV = (
    "USER,event_type,occurred_at\n"
    "u1,login,2026-11-20T10:00:00Z\n"
    "u2,login\n"  # a cell short: the reader's problem, not a cell's
    "u3,login,2026-11-20T10:00:00Z\n"
    "u4,login,2026-11-20T10:00:00Z"  # no final newline: the reader's note
)


def test_a_readers_problems_and_notes_ride_beside_the_frame(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text(CSV)
    spec = ReadSpec(rename=(("USER", "external_user_id"),))
    (part,) = iter_slices(path, spec)
    assert list(part.frame.columns) == ["external_user_id", "event_type", "occurred_at"]
    assert part.frame.attrs == {}
    assert [(p, check) for p, (check, *_) in part.problems.items()] == [(1, "line_cells")]
    assert [n["kind"] for n in part.notes] == ["no_final_newline"]


def test_a_split_slice_keeps_each_problem_on_its_row() -> None:
    frame = pd.DataFrame({"a": range(5)})
    part = Slice(frame, {1: ("line_cells", "one"), 3: ("truncated", "three")}, {4: ("a", "k", "m")})
    head, rest = part.split(2)
    assert (len(head), len(rest)) == (2, 3)
    assert head.problems == {1: ("line_cells", "one")} and head.repeats == {}
    assert rest.problems == {1: ("truncated", "three")} and rest.repeats == {2: ("a", "k", "m")}


def test_the_problems_survive_hive_columns_and_reach_the_report(tmp_path: Path) -> None:
    # restoring a folder's column concatenates frames, which drops attrs: the notes were
    # carried over it by hand; as a value they cannot be lost
    folder = tmp_path / "t" / "properties.plan=pro"
    folder.mkdir(parents=True)
    (folder / "part-0.csv").write_text(CSV)
    report = cc.validate_events(tmp_path / "t", now=NOW, rename={"USER": "external_user_id"})
    checks = report.failures.set_index("row")["check"].to_dict()
    assert checks == {"properties.plan=pro/part-0.csv:3": "line_cells"}
    assert [n["kind"] for n in report.notes] == ["no_final_newline"]
    assert report.valid["properties.plan"].tolist() == ["pro"] * 3
