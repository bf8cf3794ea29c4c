"""The docs' reference pages follow the code: what is generated is current, what is written
by hand names everything the code has, and the README's links lead somewhere.

Generated between markers, and checked here: the command line (docs/reference/cli.md, from
the argparse parsers), the validation checks (docs/reference/checks.md, from
``churn_connector._validate.checks``) and the options' tables (docs/reference/options.md, from
the options' declarations, ``churn_connector._core.declarations``).
``python tests/docs/test_docs_reference.py`` rewrites them (``make docs-reference``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import runpy
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import churn_connector as cc
from churn_connector import _cli
from churn_connector._client import IdentifyOptions, SendEventsOptions
from churn_connector._core.declarations import Option, options_of
from churn_connector._delivery.send_options import SendOptions
from churn_connector._sandbox import _cli as sandbox_cli
from churn_connector._sync import SyncOptions
from churn_connector._validate.checks import markdown_table, readme_with_table
from churn_connector._validate.gate import GateOptions

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "reference" / "cli.md"
CHECKS_PAGE = DOCS / "reference" / "checks.md"
OPTIONS_PAGE = DOCS / "reference" / "options.md"
API_PAGES = DOCS / "reference" / "api"
CLI_BLOCK = re.compile(r"(<!-- cli:start -->\n).*?(<!-- cli:end -->)", re.DOTALL)
OPTIONS_BLOCK = re.compile(
    r"(<!-- options:(\w+):start -->\n).*?(<!-- options:\2:end -->)", re.DOTALL
)


# --------------------------------------------------------------------------- the CLI page


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, Any]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _spelling(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes_value = action.nargs != 0
    value = ""
    if takes_value:
        if action.metavar is not None:
            value = f" {action.metavar}"
        elif action.choices is None:
            value = f" {action.dest.upper()}"
    return ", ".join(f"`{flag}{value}`" for flag in action.option_strings)


def _meaning(action: argparse.Action) -> str:
    parts = [action.help % {"default": action.default} if action.help else ""]
    if action.choices is not None:
        parts.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if isinstance(action, argparse._AppendAction) and "repeatable" not in (action.help or ""):
        parts.append("repeatable")
    default = action.default
    shown = default not in (None, False, argparse.SUPPRESS) and "default" not in parts[0]
    if shown and action.option_strings:
        parts.append(f"default `{default}`")
    return _cell("; ".join(p for p in parts if p))


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = [
        f"| {_spelling(a)} | {_meaning(a)} |"
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction) and a.help != argparse.SUPPRESS
    ]
    return ["| argument | meaning |", "|---|---|", *rows] if rows else []


def cli_reference() -> str:
    """The command line, rendered from its parsers (not from --help, whose layout changes
    with the terminal's width and the Python version)."""
    main = _cli.build_parser()
    out = [
        "## churn-connector",
        "",
        _cell(main.description or ""),
        "",
        *_options_table(main),
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    subs = list(_subcommands(main))
    out += [f"| [`{name}`](#churn-connector-{name}) | {_cell(text)} |" for name, text, _ in subs]
    out += ["", "```text", (main.epilog or "").rstrip(), "```"]
    for name, text, sub in subs:
        if name == "sandbox":  # a program of its own, with its own parser
            sub = sandbox_cli.build_parser()
            text = sub.description or text
        out += ["", f"## churn-connector {name}", "", _cell(text), "", *_options_table(sub)]
        for inner, inner_text, inner_sub in _subcommands(sub):  # ledger stats, ...
            out += ["", f"### churn-connector {name} {inner}", "", _cell(inner_text), ""]
            out += _options_table(inner_sub)
    return "\n".join(out) + "\n"


def cli_page_with_reference(text: str) -> str:
    return CLI_BLOCK.sub(lambda m: m.group(1) + cli_reference() + m.group(2), text)


def test_the_cli_page_is_the_parsers() -> None:
    text = CLI_PAGE.read_text()
    assert CLI_BLOCK.search(text), "docs/reference/cli.md lost its cli:start/cli:end markers"
    assert cli_page_with_reference(text) == text, (
        "docs/reference/cli.md is stale: run `make docs-reference`"
    )


def test_the_cli_page_names_every_option_of_every_command() -> None:
    text = CLI_PAGE.read_text()
    parsers = [_cli.build_parser(), sandbox_cli.build_parser()]
    parsers += [sub for _, _, sub in _subcommands(parsers[0])]
    parsers += [inner for sub in parsers[2:] for _, _, inner in _subcommands(sub)]
    flags = {f for p in parsers for a in p._actions for f in a.option_strings if f != "-h"}
    assert {"--rename", "--ledger", "--drop-rate", "--out"} <= flags
    assert [f for f in sorted(flags) if f"`{f}" not in text] == []


# --------------------------------------------------------------------------- the checks page


def test_the_checks_page_lists_every_registered_check() -> None:
    text = CHECKS_PAGE.read_text()
    assert markdown_table() in text, "docs/reference/checks.md is stale: run `make docs-reference`"
    assert readme_with_table(text) == text


# --------------------------------------------------------------------------- the options page

# the keyword that takes the others whole
_WHOLE_ROW = (
    "| `options` | `None` | — | all of the above as one value, passed whole: "
    "`cc.EventOptions(...)` (events) or `cc.IdentityOptions(...)` (identities) |"
)
# keywords of cc.Client that are no field of ClientConfig
_CLIENT_ROWS = [
    "| `timeouts` | the flat four's | — | `connect_timeout`, `read_timeout`, `request_timeout` "
    "and `deadline` as one `cc.Timeouts(connect=..., read=..., request=..., deadline=...)`; "
    "give each once |",
    "| `session` | `None` | — | a `requests.Session` of yours "
    "([Sending](../concepts/sending.md#your-own-requests-session)) |",
]


def _default_text(option: Option) -> str:
    if option.declared.shown_default is not None:
        return option.declared.shown_default
    value = option.default
    plain = isinstance(value, str) and '"' not in value
    return f"`{json.dumps(value) if plain else repr(value)}`"


def _flag_text(option: Option) -> str:
    declared, flag = option.declared, option.flag
    if declared.shown_flag is not None:
        return declared.shown_flag
    if flag is None:
        return "—"
    spelled = f"`{flag} {declared.metavar}`" if declared.metavar else f"`{flag}`"
    return spelled + (" (repeatable)" if declared.repeat else "")


def _rows(options: list[Option], *, flags: bool = True, kinds: bool = False) -> list[str]:
    events = {o.name for o in cc.EventOptions.keywords()}
    identities = {o.name for o in cc.IdentityOptions.keywords()}
    rows = []
    for option in options:
        doc = option.declared.doc
        if kinds and option.name not in identities:
            doc = f"events: {doc}"
        elif kinds and option.name not in events:
            doc = f"identities: {doc}"
        cells = [f"`{option.name}`", _default_text(option)]
        cells += [_flag_text(option)] if flags else []
        rows.append("| " + " | ".join([*cells, doc]) + " |")
    return rows


def options_tables() -> dict[str, str]:
    """The options page's tables, by the name of their markers."""
    head = ["| option | default | CLI | what it does |", "|---|---|---|---|"]
    data = {o.name: o for o in [*cc.EventOptions.keywords(), *cc.IdentityOptions.keywords()]}
    tables = {
        "data": [*head, *_rows(list(data.values()), kinds=True), _WHOLE_ROW],
        "send": [*head, *_rows(list(options_of(SendOptions)))],
        "sync": [*head, *_rows(list(options_of(SyncOptions)))],
        "gate": [*head, *_rows(list(options_of(GateOptions)))],
        "client": [*head, *_rows(list(options_of(cc.ClientConfig))), *_CLIENT_ROWS],
        "timeouts": [
            "| field | default | what it does |",
            "|---|---|---|",
            *_rows(list(options_of(cc.Timeouts)), flags=False),
        ],
        "retry": [
            "| option | default | what it does |",
            "|---|---|---|",
            *_rows(list(options_of(cc.RetryPolicy)), flags=False),
        ],
    }
    return {name: "\n".join(rows) + "\n" for name, rows in tables.items()}


def options_page_with_tables(text: str) -> str:
    tables = options_tables()
    return OPTIONS_BLOCK.sub(lambda m: m.group(1) + tables[m.group(2)] + m.group(3), text)


def test_the_options_page_is_the_declarations() -> None:
    text = OPTIONS_PAGE.read_text()
    found = {m.group(2) for m in OPTIONS_BLOCK.finditer(text)}
    assert found == set(options_tables()), "docs/reference/options.md lost a table's markers"
    assert options_page_with_tables(text) == text, (
        "docs/reference/options.md is stale: run `make docs-reference`"
    )


# --------------------------------------------------------------------------- hand-written pages


def _documented_objects() -> set[str]:
    return {
        m.group(1)
        for page in API_PAGES.glob("*.md")
        for m in re.finditer(r"^::: ([\w.]+)", page.read_text(), re.MULTILINE)
    }


def _exports(module: str) -> list[str]:
    """A package's ``__all__``, read from its source: importing ``churn_connector.spark``
    needs PySpark, which not every test environment has."""
    init = ROOT.joinpath(*module.split("."), "__init__.py")
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{module} has no __all__")


def test_exports_read_from_source_are_what_python_imports() -> None:
    assert _exports("churn_connector") == cc.__all__
    assert "ChurnHook" in _exports("churn_connector.airflow")


@pytest.mark.parametrize(
    "module",
    [
        "churn_connector",
        "churn_connector.airflow",
        "churn_connector.spark",
        "churn_connector.dagster",
    ],
)
def test_the_api_reference_documents_every_public_name(module: str) -> None:
    public = _exports(module)
    missing = [
        n for n in public if n != "__version__" and f"{module}.{n}" not in _documented_objects()
    ]
    assert missing == [], f"add `::: {module}.<name>` to a page of docs/reference/api/"


def test_the_api_reference_documents_only_public_names() -> None:
    # a module's entry shows its docstring (the Spark overview, the exception tree)
    modules = {"churn_connector.spark", "churn_connector._core.exceptions"}
    for path in _documented_objects() - modules:
        module, _, name = path.rpartition(".")
        exported = _exports(module)
        assert name in exported, f"{path} is not a public name"


def _option_names() -> set[str]:
    names = set(cc.ClientConfig.__dataclass_fields__) | set(cc.RetryPolicy.__dataclass_fields__)
    for options in (SendEventsOptions, IdentifyOptions):
        names |= options.__required_keys__ | options.__optional_keys__
    return names | {"session"}


def test_the_options_page_names_every_option() -> None:
    text = OPTIONS_PAGE.read_text()
    assert {"deadline", "ledger", "max_attempts", "epoch_unit"} <= _option_names()
    missing = sorted(n for n in _option_names() if f"| `{n}` |" not in text)
    assert missing == [], "docs/reference/options.md has no row for these options"


def test_the_options_page_names_every_cli_option_of_validate_and_send() -> None:
    text = OPTIONS_PAGE.read_text()
    subs = {name: sub for name, _, sub in _subcommands(_cli.build_parser())}
    flags = {
        f
        for name in ("validate", "send")
        for a in subs[name]._actions
        for f in a.option_strings
        if f.startswith("--") and f != "--help"
    }
    missing = sorted(f for f in flags if f not in text)
    assert missing == [], "docs/reference/options.md does not name these CLI options"


# --------------------------------------------------------------------------- the README

LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_links_to_files_that_exist() -> None:
    links = [m.group(1) for m in LINK.finditer((ROOT / "README.md").read_text())]
    local = [link.split("#", 1)[0] for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    assert [link for link in local if link and not (ROOT / link).exists()] == []


def test_the_readme_is_one_screen_and_keeps_the_quick_start() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "make demo" in text and "make test" in text


def test_the_documentation_url_is_the_docs_folder_not_a_made_up_host() -> None:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert (ROOT / urls["Documentation"] / "index.md").is_file()


def test_no_docstring_cites_a_file_the_repository_does_not_have() -> None:
    cited = {
        (path.relative_to(ROOT), name)
        for path in (ROOT / "churn_connector").rglob("*.py")
        for name in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", path.read_text())
        if not (ROOT / name).exists()
    }
    assert cited == set()


def main() -> int:
    """Rewrite the generated parts of the reference pages, and the contributing page's map
    of the package (checked by tests/core/test_layout.py)."""
    CLI_PAGE.write_text(cli_page_with_reference(CLI_PAGE.read_text()))
    CHECKS_PAGE.write_text(readme_with_table(CHECKS_PAGE.read_text()))
    OPTIONS_PAGE.write_text(options_page_with_tables(OPTIONS_PAGE.read_text()))
    runpy.run_path(str(DOCS / "_tools" / "package_map.py"))["main"]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
