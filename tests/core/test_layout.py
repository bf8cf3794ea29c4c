"""The house rules of the package layout, checked on the source: every import points down
the flow read → validate → wire → ledger → chunk → send → results, or to the shared ground."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "churn_connector"

# the floors of the house, from the ground up: a module may import its own floor and the
# floors below it, never one above (the flow read → validate → wire → ledger → chunk → send
# → results, standing on the shared ground)
FLOORS: list[tuple[str, set[str]]] = [
    ("core", {"_core", "__version__"}),  # vocabulary, exceptions, config, words, row book
    ("json", {"_json"}),  # values, timestamps and Arrow columns made JSON-exact
    ("notebook", {"_notebook"}),  # how reports and results look in Jupyter
    ("read", {"_read"}),  # anything a user hands in -> labelled slices
    ("validate", {"_validate"}),  # pandera, the check registry, schema blocks, the report
    ("options", {"_options"}),  # the table options, declared once
    # validated rows -> exact bytes: the canonical form, message ids, natural keys, bodies
    ("wire", {"_wire"}),
    ("slices", {"_slices"}),  # slices -> validated wire batches (what both wings share)
    ("resources", {"_events", "_identities"}),  # one wing per resource (never each other)
    # what the API acknowledged, to skip it on re-runs: one API (base, scoped, stage) over
    # a SQLite file, a PostgreSQL table or object-storage segments
    ("ledger", {"_ledger"}),
    ("delivery", {"_delivery"}),  # chunking, retry, connections, transport, the sender
    ("results", {"_results"}),  # the SendResult and the result files
    ("run", {"_run"}),  # one send, stage by stage
    ("track", {"_track"}),  # one-off events: the scalar engine, the tracker, its spool
    ("client", {"_client"}),  # the Client and the one-call forms
    ("tasks", {"_tasks", "_resend"}),  # what every orchestrator task does around a send
    ("top", {"_cli", "__init__", "airflow", "spark", "dagster", "samples"}),
]
FLOOR_NAMES = [name for name, _ in FLOORS]
WINGS = {"_events", "_identities"}
MAX_LINES = 500


def room_of(parts: tuple[str, ...]) -> str:
    head = parts[0].removesuffix(".py")
    if head == "_sandbox":
        return "sandbox"
    for name, heads in FLOORS:
        if head in heads:
            return name
    raise AssertionError(f"{'/'.join(parts)} stands on no floor: add it to FLOORS")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def internal_imports(path: Path) -> list[tuple[tuple[str, ...], int]]:
    """(target module parts under the package, line) for every import of our own code."""
    tree = ast.parse(path.read_text())
    here = path.relative_to(PACKAGE).parts[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
            elif node.module is not None and node.module.startswith("churn_connector"):
                base = ()
                node = ast.ImportFrom(
                    module=node.module.removeprefix("churn_connector").lstrip(".") or None,
                    names=node.names,
                    level=1,
                    lineno=node.lineno,
                )
            else:
                continue
            target = (*base, *(node.module.split(".") if node.module else ()))
            if target:
                found.append((target, node.lineno))
            else:  # "from . import x": each name is a module of this package
                found.extend(((*base, a.name), node.lineno) for a in node.names)
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_the_flow(path: Path) -> None:
    parts = path.relative_to(PACKAGE).parts
    mine = room_of(parts)
    for target, line in internal_imports(path):
        theirs = room_of(target)
        where = f"{'/'.join(parts)}:{line} imports {'.'.join(target)}"
        if mine == "sandbox" or theirs == "sandbox":
            # the sandbox is written from the contract alone and shares nothing with us
            assert mine == theirs or mine == "top", where
            continue
        assert FLOOR_NAMES.index(theirs) <= FLOOR_NAMES.index(mine), where
        if mine == theirs == "resources":
            assert target[0] == parts[0], f"{where}: one wing never imports the other"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outside_the_sandbox_is_long(path: Path) -> None:
    if path.relative_to(PACKAGE).parts[0] == "_sandbox":
        return
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_both_wings_have_the_same_core_rooms() -> None:
    core = {"schema.py", "stream.py", "api.py"}
    for wing in WINGS:
        assert core <= {p.name for p in (PACKAGE / wing).glob("*.py")}, wing


def test_importing_the_package_leaves_optional_parts_unloaded() -> None:
    code = (
        "import sys, churn_connector\n"
        "heavy = ['pandera', 'phonenumbers', 'churn_connector._sandbox', 'pyspark', 'airflow', "
        "'matplotlib', 'ipywidgets', 'requests', 'polars', 'duckdb', 'argparse', "
        "'psycopg', 'fsspec', 's3fs', 'churn_connector._ledger.postgres', "
        "'churn_connector._ledger.objects', 'dagster', 'deltalake', 'pyiceberg', "
        "'churn_connector._read.delta', 'churn_connector._read.iceberg', 'pyarrow.orc']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_console_scripts_entry_module_takes_the_signals_before_loading_the_package() -> None:
    # churn_connector_cli, beside the package: anything it imported at its top would load
    # before its signal handlers, and a Ctrl-C there would print a traceback
    code = (
        "import signal, sys, churn_connector_cli\n"
        "print(sorted(m for m in sys.modules if m.startswith('churn_connector') "
        "and m != 'churn_connector_cli'), 'pandas' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[] False"
