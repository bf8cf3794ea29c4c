"""The command line's flags, derived from the options' declarations (``_core.declarations``).

The data flags of ``validate`` and ``send`` say what the input is and how it is read and
validated: one flag per keyword of the Python calls, spelled, explained and checked as that
keyword's declaration says (an option of one kind of table is refused for the other). The
``send`` flags of a run (``--dry-run``, ``--ledger``) and of the client (timeouts, TLS,
proxy, ...) come from ``SendOptions`` and ``ClientConfig`` the same way. A value left at
its default is not passed on: the Python default applies.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING
from pathlib import Path
from typing import Any

from .._core import FLAGS, ClientConfig, ConfigurationError, Kind, Option, alternatives, options_of
from .._delivery import SendOptions
from .._options import EventOptions, IdentityOptions
from .._read import TextFormat, sql, without_url_password
from .._sync import SyncOptions

_TEXT_GROUP = "text exports (CSV/TSV as warehouses write them)"
_TABLES: dict[Kind, type[EventOptions] | type[IdentityOptions]] = {
    "events": EventOptions,
    "identities": IdentityOptions,
}


def _on_command_line(options: Iterable[Option]) -> list[Option]:
    """The options whose flag is derived (declared with ``help``)."""
    return [o for o in options if o.declared.help is not None]


def data_flags() -> list[Option]:
    """The data options with a flag: the tables' keywords, those of events then identities'."""
    seen: dict[str, Option] = {}
    for table in _TABLES.values():
        for option in table.keywords():
            seen.setdefault(option.name, option)
    return _on_command_line(seen.values())


def _kinds(option: Option) -> list[Kind]:
    return [
        kind for kind, table in _TABLES.items() if option.name in {o.name for o in table.keywords()}
    ]


def _value_type(hint: Any) -> Any:
    """How a flag's text is read, by the option's type hint (None: as text)."""
    args = typing.get_args(hint) or (hint,)
    return next((kind for kind in (int, float) if kind in args), None)


def _is_mapping(hint: Any) -> bool:
    args = typing.get_args(hint) or (hint,)
    return any((typing.get_origin(a) or a) is Mapping for a in args)


def _reading(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A declared parser as argparse calls it: its ValueError's message is the usage error
    (argparse would say only "invalid <function name> value")."""

    def read(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    read.__name__ = getattr(parse, "__name__", "value")
    return read


def add_flag(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, option: Option, *, by_kind: bool = True
) -> None:
    """The flag of one declared option: its spelling, help, metavar, choices and type
    (``by_kind``: the help says which kind of table an option of one kind is for)."""
    declared, flag = option.declared, option.flag
    assert flag is not None, f"{option.name} has no flag"
    kinds = _kinds(option)
    help_text = declared.help or ""
    if by_kind and len(kinds) == 1:
        help_text = f"{kinds[0]}: {help_text}"
    default = flag_default(option)
    settings: dict[str, Any] = {"dest": option.name, "default": default, "help": help_text}
    if option.hint is bool:
        settings["action"] = "store_false" if default else "store_true"
    else:
        if declared.repeat:
            settings["action"] = "append"
        settings["type"] = _reading(declared.parse) if declared.parse else _value_type(option.hint)
        settings["choices"] = option.choices
        settings["metavar"] = declared.metavar
    p.add_argument(flag, **settings)


def flag_default(option: Option) -> Any:
    """The flag's value when it is not given: the option's default (None for a required
    field, ``ClientConfig.base_url``: the environment gives it then)."""
    return None if option.default is MISSING else option.default


def input_argument(text: str) -> Path | str:
    """The input as the command line names it: a path, or a table's URL
    (``iceberg://catalog/ns.table``) kept as written (a ``Path`` would fold its ``//``)."""
    return text if "://" in text else Path(text)


def add_data_arguments(
    p: argparse.ArgumentParser, *, skip: Iterable[str] = (), positional: bool = True
) -> None:
    """The input and its reading and validation, as ``validate`` and ``send`` take them
    (but the options named in ``skip``, whose flags the command adds itself; without
    ``positional``, the kind and the input too)."""
    if positional:
        p.add_argument("kind", choices=list(_TABLES))
        p.add_argument(
            "file",
            type=input_argument,
            nargs="?",
            default=None,
            help="(or --sql and --connection) a .parquet, .csv, .tsv, .ndjson, .avro, .orc or "
            ".arrow file (text optionally .gz/.zst), a folder of part files (or a Redshift "
            "manifest), a glob (quote it), a Delta table's folder, or an Iceberg table (its "
            "metadata file or folder, or iceberg://CATALOG/NAMESPACE.TABLE)",
        )
        query = p.add_argument_group("a query of a database (instead of a file)")
        query.add_argument(
            "--sql",
            metavar="QUERY",
            help="read the rows of this SELECT (column aliases name the fields: plan AS "
            '"properties.plan"), streamed as Arrow batches; with --connection',
        )
        query.add_argument(
            "--connection",
            type=_reading(without_url_password),
            metavar="URL",
            help="the database --sql reads: postgresql://USER@HOST/DB (the password from "
            "PGPASSWORD or ~/.pgpass, never in the URL), sqlite:///PATH or a .sqlite/.db "
            "file, duckdb:///PATH or a .duckdb file, or another SQLAlchemy URL",
        )
    text = p.add_argument_group(_TEXT_GROUP)
    layout = {o.name for o in options_of(TextFormat)}
    for option in data_flags():
        if option.name not in skip:
            add_flag(text if option.name in layout else p, option)


def input_of(args: argparse.Namespace) -> Any:
    """What ``validate`` and ``send`` read: the file (or table) named, or ``--sql`` on
    ``--connection`` (``cc.sql``)."""
    if args.sql is None:
        if args.connection is not None:
            raise ConfigurationError("--connection names the database of a query: add --sql")
        if args.file is None:
            raise ConfigurationError(
                "name the input: a file, folder or table, or a query (--sql and --connection)"
            )
        return args.file
    if args.file is not None:
        raise ConfigurationError(
            f"{args.file} and --sql: one input a run; drop the file or the query"
        )
    if args.connection is None:
        raise ConfigurationError(
            "--sql needs the database it reads: --connection URL (postgresql://USER@HOST/DB, "
            "sqlite:///PATH, duckdb:///PATH)"
        )
    return sql(args.sql, args.connection)


def add_sync_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of an incremental sync (``SyncOptions``: ``--cursor``, ``--lookback``,
    ``--sync-name``, ``--full-refresh``, ...)."""
    group = p.add_argument_group("incremental syncs (with --ledger: read only what is new)")
    for option in _on_command_line(options_of(SyncOptions)):
        add_flag(group, option, by_kind=False)


def sync_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of the sync that ``--cursor``, ``--lookback``, ... stand for."""
    return _given(args, options_of(SyncOptions))


def add_send_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of a run (``SendOptions``: ``--dry-run``, ``--ledger``, ``--concurrency``)
    and of the client (``ClientConfig``: ``--base-url``, timeouts, trust, ...)."""
    for option in _on_command_line([*options_of(SendOptions), *options_of(ClientConfig)]):
        add_flag(p, option)


def add_client_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of the client (``ClientConfig``): base URL, timeouts, deadline, retries,
    trust."""
    for option in _on_command_line(options_of(ClientConfig)):
        add_flag(p, option)


def add_event_flags(p: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """The flags of these events options, for a command that takes events only (``track``:
    its help needs no "events:")."""
    declared = {o.name: o for o in EventOptions.keywords()}
    for name in names:
        add_flag(p, declared[name], by_kind=False)


def _given(args: argparse.Namespace, options: Iterable[Option]) -> dict[str, Any]:
    """The values of these options' flags that differ from their defaults."""
    given = {}
    for option in _on_command_line(options):
        value = getattr(args, option.name)
        if value is not flag_default(option) and not option.is_default(value):
            given[option.name] = dict(value) if _is_mapping(option.hint) else value
    return given


def data_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of the Python calls that the data flags stand for."""
    given = _given(args, data_flags())
    mine = {o.name for o in _TABLES[args.kind].keywords()}
    if wrong := [FLAGS[name] for name in given if name not in mine]:
        other = next(kind for kind in _TABLES if kind != args.kind)
        raise ConfigurationError(
            f"{alternatives(wrong).replace(' or ', ' and ')}: not for {args.kind}; these "
            f"options apply to {other} only"
        )
    return given


def send_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of the send that ``--dry-run``, ``--ledger``, ``--concurrency``, ...
    stand for."""
    return _given(args, options_of(SendOptions))


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ClientConfig`` fields that the client's flags stand for (``base_url`` among
    them when ``--base-url`` is given: ``ClientConfig.create`` takes it by name)."""
    return _given(args, options_of(ClientConfig))


def inputs_of(args: argparse.Namespace) -> list[Any]:
    """What a run reads that a result file must never replace: the input, and a ledger
    that is a local file (a SQLite ledger's path)."""
    found: list[Any] = [getattr(args, "file", None), getattr(args, "rows_file", None)]
    ledger = getattr(args, "ledger", None)
    if isinstance(ledger, str | Path) and local_file(ledger):
        found.append(Path(ledger))
    return [f for f in found if f is not None]


def local_file(text: str | Path) -> bool:
    """A ledger named as a local file: no URL (``postgresql://``, ``s3://``), no libpq
    ``key=value`` settings."""
    spelled = str(text)
    return "://" not in spelled and "=" not in spelled
