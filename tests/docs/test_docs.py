"""Every Python example of the docs runs, so none of them rots.

Collected: the fenced ```` ```python ```` blocks of ``docs/**/*.md`` and ``README.md``. The
blocks of one page run in order in one namespace (a later block may use an earlier one's
names), as one test, in a temporary folder that holds the sample files below, against a
sandbox of the page's own: ``CHURN_BASE_URL`` and ``CHURN_API_KEY`` point at it, and retries
do not wait (``cc.instant_retries()``). Warnings are errors, as everywhere in the suite.

A block that is not meant to run says so, and why, on the line before its fence::

    <!-- not-run: needs a Spark session, which the tests start in a process of their own -->

A marker without a reason fails, and so does one that precedes no Python block. Only
``python`` fences hold Python (``py``, ``python3``, ``pycon`` are refused, so nothing slips
past); blocks of other languages (``sh``, ``text``, ``json``, ``yaml``) are not run.

The folder holds, written from ``churn_connector.samples`` (events of the last 20 days, with
a few bad rows; users with a few bad rows):

- ``export.parquet``, ``export.csv``: the events; ``users.parquet``, ``users.csv``: the users;
- ``parts/part-0.parquet``, ``parts/part-1.parquet``: the events in two parts;
- ``unload/2026-11-20/``: the events as a warehouse unload, ``part-0000{0,1}.csv.gz`` and a
  ``_SUCCESS`` marker;
- ``warehouse.duckdb`` and ``warehouse.sqlite``: a table ``events``; in DuckDB with warehouse
  column names (``user_id``, ``event``, ``ts TIMESTAMPTZ``, ``properties``), in SQLite as the
  export's columns.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


ROOT = Path(__file__).parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
MARKER = re.compile(r"^\s*<!--\s*not-run\b(?P<rest>.*?)-->\s*$")
NOT_PYTHON_SPELLINGS = {"py", "python3", "pycon", "ipython", "python-repl"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the first code line, 1-based
    language: str
    code: str
    marker: str | None  # the not-run marker's text after "not-run", if any

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language == "python" and self.marker is None


def blocks(page: Path) -> Iterator[Block]:
    """The fenced blocks of a Markdown page, with the not-run marker before each, if any."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        language = opening["info"].split()[0] if opening["info"].strip() else ""
        before = next((x for x in reversed(lines[:i]) if x.strip()), "")
        marker = MARKER.match(before)
        end = i + 1
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        code = "\n".join(line[indent:] for line in lines[i + 1 : end])
        yield Block(page, i + 2, language, code, marker["rest"] if marker else None)
        i = end + 1


def markers(page: Path) -> list[int]:
    """Line numbers (1-based) of the page's not-run markers (outside code blocks)."""
    inside = {n for b in blocks(page) for n in range(b.line, b.line + b.code.count("\n") + 1)}
    lines = page.read_text().splitlines()
    return [n for n, line in enumerate(lines, 1) if MARKER.match(line) and n not in inside]


ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]
RUNNABLE_PAGES = sorted({b.page for b in ALL_BLOCKS if b.runs})


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files every page's examples may read (see the module docstring)."""
    root = tmp_path_factory.mktemp("docs-samples")
    events = cc.samples.sample_events(pd.Timestamp.now(tz="UTC"))
    users = cc.samples.sample_users()
    events.to_parquet(root / "export.parquet", index=False)
    events.to_csv(root / "export.csv", index=False)
    users.to_parquet(root / "users.parquet", index=False)
    users.to_csv(root / "users.csv", index=False)
    half = len(events) // 2
    (root / "parts").mkdir()
    events.iloc[:half].to_parquet(root / "parts" / "part-0.parquet", index=False)
    events.iloc[half:].to_parquet(root / "parts" / "part-1.parquet", index=False)
    unload = root / "unload" / "2026-11-20"
    unload.mkdir(parents=True)
    events.iloc[:half].to_csv(unload / "part-00000.csv.gz", index=False, compression="gzip")
    events.iloc[half:].to_csv(unload / "part-00001.csv.gz", index=False, compression="gzip")
    (unload / "_SUCCESS").touch()
    with sqlite3.connect(root / "warehouse.sqlite") as conn:
        events.to_sql("events", conn, index=False)
    conn.close()
    warehouse = events.rename(columns={"external_user_id": "user_id", "event_type": "event"})
    warehouse["ts"] = pd.to_datetime(warehouse.pop("occurred_at"), utc=True, format="ISO8601")
    with duckdb.connect(str(root / "warehouse.duckdb")) as db:
        db.register("frame", warehouse[["user_id", "event", "ts", "properties"]])
        db.execute("CREATE TABLE events AS SELECT * FROM frame")
    return root


def run_page(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in blocks(page):
        if not block.runs:
            continue
        # padded so a traceback's line numbers are the page's
        source = "\n" * (block.line - 1) + block.code
        try:
            exec(compile(source, str(block.page), "exec"), namespace)  # noqa: S102
        except Exception as exc:
            raise AssertionError(f"the example at {block.where} failed: {exc!r}") from exc


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_examples_run(
    page: Path, samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "work"
    shutil.copytree(samples, folder)
    monkeypatch.chdir(folder)
    with cc.Sandbox() as sandbox, cc.instant_retries():
        monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
        monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
        try:
            run_page(page)
        finally:
            if "matplotlib.pyplot" in sys.modules:
                sys.modules["matplotlib.pyplot"].close("all")
    assert os.getcwd() == str(folder)


def test_the_docs_have_runnable_examples_on_most_pages() -> None:
    assert len([b for b in ALL_BLOCKS if b.runs]) >= 25
    assert ROOT / "README.md" in RUNNABLE_PAGES
    assert len(RUNNABLE_PAGES) >= 15


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_not_run_marker_says_why_and_precedes_a_python_block(page: Path) -> None:
    marked = {b.line for b in blocks(page) if b.marker is not None}
    for block in blocks(page):
        if block.marker is None:
            continue
        reason = block.marker.lstrip(":").strip()
        assert block.marker.lstrip().startswith(":") and reason, (
            f"{block.where}: write <!-- not-run: <why> -->"
        )
        assert block.language == "python", f"{block.where}: a marker before a non-Python block"
    assert len(markers(page)) == len(marked), (
        f"{page.relative_to(ROOT)}: a not-run marker that is not right before a code block"
    )


def test_python_blocks_use_the_python_fence() -> None:
    odd = [b.where for b in ALL_BLOCKS if b.language.lower() in NOT_PYTHON_SPELLINGS]
    assert odd == [], "fence Python as ```python, so the docs test runs it"


def test_the_collector_reads_fences_markers_and_indents(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\n<!-- not-run: needs Spark -->\n```python\nspark\n```\n"
        "\n- a list item\n\n  ```python\n  y = x + 1\n  ```\n\n```sh\nls\n```\n"
    )
    found = list(blocks(page))
    assert [(b.language, b.code, b.runs) for b in found] == [
        ("python", "x = 1", True),
        ("python", "spark", False),
        ("python", "y = x + 1", True),
        ("sh", "ls", False),
    ]
    assert found[1].marker is not None and "needs Spark" in found[1].marker
    assert [b.line for b in found] == [4, 9, 15, 19]
