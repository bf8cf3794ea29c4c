"""The map of the package on the contributing page, written from the code.

One line per module: its path in the tree and the first sentence of its docstring; a room
(a folder) shows its ``__init__``'s. Rooms come in the order of the floors the layout test
enforces (``tests/core/test_layout.py``'s ``FLOORS``: the flow, from the shared ground up),
the floors set apart by an empty branch. The map goes between the page's
``<!-- map:start -->`` and ``<!-- map:end -->`` markers: ``python docs/_tools/package_map.py``
(or ``make docs-reference``) rewrites it, and the layout test fails when it is stale.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "churn_connector"
PAGE = ROOT / "docs" / "contributing.md"
MAP_BLOCK = re.compile(r"(<!-- map:start -->\n).*?(<!-- map:end -->)", re.DOTALL)
WIDTH = 100  # of a line of the map
COLUMN = 26  # where the descriptions start
# the end of a docstring's first sentence: a full stop before a space or the end
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)")
_ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):`~?([\w.]+)`")


def summary(path: Path) -> str:
    """The first sentence of a module's docstring (its first paragraph, joined), as plain
    text: ``code`` and Sphinx roles (:class:`Client`) lose their marks."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    paragraph = _ROLE.sub(r"\1", paragraph).replace("``", "")
    end = _SENTENCE_END.search(paragraph)
    return paragraph if end is None else paragraph[: end.end()]


def _entry(prefix: str, name: str, text: str, below: str) -> list[str]:
    """One module's lines: ``prefix + name``, its description wrapped at the column, the
    wrapped lines led by ``below`` (the tree's branches that continue past it)."""
    head = f"{prefix}{name}"
    lines = textwrap.wrap(text, WIDTH - COLUMN, break_on_hyphens=False) or [""]
    out = [f"{head:<{COLUMN - 1}} {lines[0]}" if len(head) < COLUMN else f"{head}"]
    rest = lines[1:] if len(head) < COLUMN else lines
    out += [f"{below:<{COLUMN}}{line}" for line in rest]
    return [line.rstrip() for line in out]


def _room_modules(room: Path) -> list[Path]:
    return sorted(p for p in room.glob("*.py") if p.name != "__init__.py")


def package_map(order: Sequence[Sequence[str]], package: Path = PACKAGE) -> str:
    """The map: the package's rooms floor by floor (``order``: each floor's rooms, the
    names of folders or of modules without ``.py``), each folder with its modules."""
    rooms = {p.name.removesuffix(".py") for p in package.iterdir() if p.suffix == ".py"} | {
        p.name for p in package.iterdir() if (p / "__init__.py").is_file()
    }
    placed = [room for floor in order for room in floor]
    missing = sorted(rooms - set(placed))
    if missing:
        raise ValueError(f"rooms on no floor: {missing}")
    lines = [f"{package.name}/"]
    floors = [list(floor) for floor in order if floor]
    for f, floor in enumerate(floors):
        for r, room in enumerate(floor):
            last = f == len(floors) - 1 and r == len(floor) - 1
            branch, below = ("└── ", "    ") if last else ("├── ", "│   ")
            folder = package / room
            if (folder / "__init__.py").is_file():
                modules = _room_modules(folder)
                lines += _entry(branch, f"{room}/", summary(folder / "__init__.py"), below + "│   ")
                for m, module in enumerate(modules):
                    end = m == len(modules) - 1
                    twig, under = ("└── ", "    ") if end else ("├── ", "│   ")
                    lines += _entry(below + twig, module.name, summary(module), below + under)
            else:
                lines += _entry(branch, f"{room}.py", summary(package / f"{room}.py"), below)
        if f < len(floors) - 1:
            lines.append("│")
    return "\n".join(lines) + "\n"


def page_with_map(text: str, made: str) -> str:
    """The contributing page with ``made`` between its map markers."""
    if MAP_BLOCK.search(text) is None:
        raise ValueError(f"{PAGE} has no <!-- map:start --> ... <!-- map:end --> markers")
    block = "```text\n" + made + "```\n"
    return MAP_BLOCK.sub(lambda m: m.group(1) + block + m.group(2), text)


def floors() -> list[list[str]]:
    """The floors of the house, from the layout test: the root's ``__init__`` first (the
    public face), the sandbox last (it shares nothing)."""
    layout = _load(ROOT / "tests" / "core" / "test_layout.py")
    order: list[list[str]] = [["__init__"]]
    for _, rooms in layout.FLOORS:
        order.append([r for r in rooms if r != "__init__"])
    order.append(["_sandbox"])
    return order


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    """Rewrite the map on the contributing page."""
    PAGE.write_text(page_with_map(PAGE.read_text(), package_map(floors())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
