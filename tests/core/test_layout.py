"""The house rules of the package layout, checked on the source: every import points down
the flow read → validate → wire → ledger → chunk → send → results, or to the shared ground,
and goes through the face of the room it enters.

A room is a folder of the package (``_ledger/``) or a module beside them (``_client.py``).
Its face is its ``__init__.py`` (a module is its own face): ``__all__`` there lists what
other rooms may use, and they import it from there (``from .._ledger import LedgerStage``,
never ``from .._ledger.stage import LedgerStage``). Tests are no room: they may reach in."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "churn_connector"

# the floors of the house, from the ground up: a module may import its own floor and the
# floors below it, never one above (the flow read → validate → wire → ledger → chunk → send
# → results, standing on the shared ground). The contributing page's map follows this order.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("__version__", "_core")),  # vocabulary, exceptions, config, words, row book
    ("json", ("_json",)),  # values, timestamps and Arrow columns made JSON-exact
    ("notebook", ("_notebook",)),  # how reports and results look in Jupyter
    ("read", ("_read",)),  # anything a user hands in -> labelled slices
    ("validate", ("_validate",)),  # pandera, the check registry, schema blocks, the report
    ("options", ("_options",)),  # the table options, declared once
    # validated rows -> exact bytes: the canonical form, message ids, natural keys, bodies
    ("wire", ("_wire",)),
    ("slices", ("_slices",)),  # slices -> validated wire batches (what both wings share)
    ("resources", ("_events", "_identities")),  # one wing per resource (never each other)
    # what the API acknowledged, to skip it on re-runs: one API (base, scoped, stage) over
    # a SQLite file, a PostgreSQL table or object-storage segments
    ("ledger", ("_ledger",)),
    ("delivery", ("_delivery",)),  # chunking, retry, connections, transport, the sender
    ("results", ("_results",)),  # the SendResult and the result files
    ("run", ("_run",)),  # one send, stage by stage
    # incremental syncs: the watermark in the ledger, the read narrowed, settled after a run
    ("sync", ("_sync",)),
    ("track", ("_track",)),  # one-off events: the scalar engine, the tracker, its spool
    (
        "client",
        ("_keywords", "_client", "_one_call"),
    ),  # the Client, its keywords and the one-call forms
    ("tasks", ("_tasks", "_resend")),  # what every orchestrator task does around a send
    ("top", ("__init__", "_cli", "airflow", "spark", "dagster", "samples")),
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
    return [(target, line) for target, _, line in imported_names(path)]


def imported_names(path: Path) -> list[tuple[tuple[str, ...], tuple[str, ...], int]]:
    """(target module parts under the package, names imported from it, line) for every
    import of our own code, at the top, in functions or for type checkers alike; a module
    imported whole (``from . import samples``) has no names."""
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
                found.append((target, tuple(a.name for a in node.names), node.lineno))
            else:  # "from . import x": each name is a module of this package
                found.extend(((*base, a.name), (), node.lineno) for a in node.names)
    return found


# -- rooms and their faces ------------------------------------------------------------------

ROOMS = sorted({p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in modules()})
# a module path written as text (importlib, a face's table of lazily loaded names)
_MODULE_TEXT = re.compile(r"(?:churn_connector)?(?:\.[A-Za-z_]\w*)+")


def is_package(room: str) -> bool:
    return (PACKAGE / room / "__init__.py").is_file()


def face_of(room: str) -> Path:
    return PACKAGE / room / "__init__.py" if is_package(room) else PACKAGE / f"{room}.py"


def offered(room: str) -> list[str] | None:
    """The names a room's face lists in ``__all__`` (None: it has no ``__all__``)."""
    for node in ast.parse(face_of(room).read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = ast.literal_eval(node.value)
            assert isinstance(names, list), f"{face_of(room)}: __all__ is a list of names"
            return names
    return None


def module_texts(path: Path) -> list[tuple[tuple[str, ...], int]]:
    """(target module parts, line) for every string constant that names one of our modules:
    ``"churn_connector._x.y"``, or relative to the module's package (``"._track"``)."""
    here = path.relative_to(PACKAGE).parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = node.value
        if not _MODULE_TEXT.fullmatch(text) or not text.startswith(("churn_connector.", ".")):
            continue
        if text.startswith("."):
            level = len(text) - len(text.lstrip("."))
            target = (*here[: len(here) - level + 1], *text.lstrip(".").split("."))
        else:
            target = tuple(text.split(".")[1:])
        if (PACKAGE.joinpath(*target).with_suffix(".py")).is_file() or is_package("/".join(target)):
            found.append((target, node.lineno))
    return found


def bindings(body: list[ast.stmt], *, typing_only: bool = False) -> dict[str, bool]:
    """Names bound at a module's top: name -> bound for type checkers only."""
    found: dict[str, bool] = {}

    def bind(name: str, *, only: bool) -> None:
        found[name] = found.get(name, True) and only

    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                bind((a.asname or a.name).split(".")[0], only=typing_only)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bind(node.name, only=typing_only)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for n in (n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                bind(n.id, only=typing_only)
        elif isinstance(node, ast.If | ast.Try):
            checking = isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            )
            parts = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                parts += [h.body for h in node.handlers]
            for i, part in enumerate(parts):
                only = typing_only or (checking and i == 0)
                for name, was in bindings(part, typing_only=only).items():
                    bind(name, only=was)
    return found


def lazily_loaded(tree: ast.Module) -> set[str]:
    """The names a face loads on first use: the keys of its table for ``lazy_names`` (or of
    its own ``_LAZY`` table)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        table = None
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "lazy_names":
            table = node.args[1] if len(node.args) > 1 else None
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_LAZY":
            table = node.value
        if isinstance(table, ast.Dict):
            found |= {str(k.value) for k in table.keys if isinstance(k, ast.Constant)}
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_rooms_use_each_other_only_through_their_faces(path: Path) -> None:
    parts = path.relative_to(PACKAGE).parts
    mine = parts[0].removesuffix(".py")
    for target, names, line in imported_names(path):
        theirs = target[0].removesuffix(".py")
        if theirs == mine:
            continue
        where = f"{'/'.join(parts)}:{line} imports {'.'.join(target)}"
        assert target == (theirs,), (
            f"{where}: import from {theirs}'s face (its __init__), not from its modules"
        )
        shown = offered(theirs) or []
        hidden = [n for n in names if n not in shown]
        assert not hidden, f"{where}: {hidden} not in {theirs}'s __all__: add it to the face"
    for target, line in module_texts(path):
        theirs = target[0]
        where = f"{'/'.join(parts)}:{line} names the module {'.'.join(target)}"
        assert theirs == mine or target == (theirs,), f"{where}: name {theirs}'s face instead"


@pytest.mark.parametrize("room", ROOMS)
def test_every_room_has_a_face_that_holds_what_it_offers(room: str) -> None:
    face = face_of(room)
    names = offered(room)
    assert names is not None, (
        f"{face.relative_to(PACKAGE)}: say what other rooms may use in __all__"
    )
    assert len(set(names)) == len(names), f"{face.relative_to(PACKAGE)}: a name twice in __all__"
    tree = ast.parse(face.read_text())
    bound = bindings(tree.body)
    lazy = lazily_loaded(tree)
    for name in names:
        assert name in bound, f"{face.relative_to(PACKAGE)}: {name} is in __all__ but not bound"
        if bound[name]:  # imported for type checkers only: loaded on first use
            assert name in lazy, f"{face.relative_to(PACKAGE)}: {name} is never loaded"
    if is_package(room) and room != "__init__":
        # a name that is also a submodule would hide it (``from .x import x``): a mock.patch
        # or an ``import a.x as m`` of the module would find the name instead
        inside = {p.name.removesuffix(".py") for p in (PACKAGE / room).iterdir()}
        assert not set(names) & inside, f"{room}: {set(names) & inside} name its modules too"


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
        "'churn_connector._read.delta', 'churn_connector._read.iceberg', 'pyarrow.orc', "
        # what the faces load on first use (_core.lazy)
        "'httpx', 'churn_connector._track.async_client', 'churn_connector._delivery.session', "
        "'churn_connector._delivery.async_poster', "
        "'churn_connector._validate.ci']\n"
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


def _tool(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_contributing_pages_map_of_the_package_is_the_code() -> None:
    # each module's docstring, floor by floor: make docs-reference writes it
    tool = _tool(ROOT / "docs" / "_tools" / "package_map.py")
    page = tool.PAGE.read_text()
    made = tool.page_with_map(page, tool.package_map(tool.floors()))
    assert made == page, "docs/contributing.md's map is stale: run make docs-reference"
