"""Options are values validated at the boundary: a bad one fails at once, never silently;
and each is declared once (``churn_connector._core.declarations``): a public keyword, a flag of
the command line or an option of Spark and Airflow that drifts from its declaration fails
here."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any, ForwardRef

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector import _cli
from churn_connector._cli.flags import data_flags
from churn_connector._client import IdentifyOptions, SendEventsOptions, send_keywords
from churn_connector._core.config import ClientOptions
from churn_connector._core.declarations import FLAGS, Option, options_of
from churn_connector._core.types import Kind
from churn_connector._delivery.send_options import SendOptions
from churn_connector._read.text import TextOptions
from churn_connector._sync import SyncOptions
from churn_connector._track.async_client import AsyncTracker
from churn_connector._track.scalar import event_of
from churn_connector._validate.gate import GateOptions
from churn_connector._validate.plan import TrackingPlan

DF = pd.DataFrame({"external_user_id": ["u"], "event_type": ["login"]})


@pytest.mark.parametrize(
    "call",
    [cc.validate_events, cc.events_to_wire, cc.validate_identities, cc.identities_to_wire],
    ids=lambda f: f.__name__,
)
def test_a_typo_in_extra_columns_is_refused_instead_of_turning_strictness_off(
    call: Callable[..., Any],
) -> None:
    with pytest.raises(cc.ConfigurationError, match="extra_columns"):
        call(DF, extra_columns="errors")


def test_a_typo_in_extra_columns_is_refused_before_sending(client: cc.Client) -> None:
    with pytest.raises(cc.ConfigurationError, match="extra_columns"):
        client.send_events(DF, extra_columns="Ignore")  # type: ignore[arg-type]


def test_a_naive_now_is_a_configuration_error() -> None:
    with pytest.raises(cc.ConfigurationError, match="timezone-aware"):
        cc.validate_events(DF, now=pd.Timestamp("2026-11-22 12:00"))


def test_an_unknown_id_column_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="id_columns"):
        cc.events_to_wire(DF, id_columns=["user"])


@pytest.mark.parametrize("rows", [0, -5, 2.5, True])
def test_slice_rows_must_be_a_positive_integer(rows: Any) -> None:
    with pytest.raises(cc.ConfigurationError, match="slice_rows"):
        cc.validate_events(DF, slice_rows=rows)


def test_a_typo_in_duplicates_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="duplicates"):
        cc.validate_identities(DF, duplicates="keep-last")  # type: ignore[arg-type]


def test_a_bad_retry_policy_is_a_configuration_error() -> None:
    with pytest.raises(cc.ConfigurationError, match="delays"):
        cc.RetryPolicy(initial_delay=-1)


def test_client_options_typed_dict_matches_the_config_fields() -> None:
    fields = set(cc.ClientConfig.__dataclass_fields__) - {"base_url", "api_key"}
    assert set(ClientOptions.__annotations__) == fields | {"timeouts"}


# --------------------------------------------------------------------------- declared once

DECLARING = [
    GateOptions,
    cc.TextFormat,
    cc.EventOptions,
    cc.IdentityOptions,
    SendOptions,
    SyncOptions,
    cc.ClientConfig,
    cc.RetryPolicy,
    cc.Timeouts,
]
# (callable, the kind its keywords are of, whether it takes the table's or the send's too)
ENTRY_POINTS: list[tuple[Callable[..., Any], Kind, str]] = [
    (cc.validate_events, "events", "table"),
    (cc.events_to_wire, "events", "table"),
    (cc.Client.send_events, "events", "send"),
    (cc.validate_identities, "identities", "table"),
    (cc.identities_to_wire, "identities", "table"),
    (cc.Client.identify, "identities", "send"),
]
SCHEMAS = [(cc.events_schema, "events"), (cc.identities_schema, "identities")]


def _keyword_only(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(function).parameters.values()
    return {p.name: p for p in parameters if p.kind is p.KEYWORD_ONLY and p.name != "options"}


def _declared(kind: Kind, takes: str) -> dict[str, Option]:
    table = cc.EventOptions if kind == "events" else cc.IdentityOptions
    return {o.name: o for o in (send_keywords(kind) if takes == "send" else table.keywords())}


def _same_keyword(parameter: inspect.Parameter, option: Option) -> None:
    where = f"{parameter.name}: the signature says"
    assert parameter.annotation == option.annotation, f"{where} {parameter.annotation}"
    assert option.is_default(parameter.default), f"{where} = {parameter.default!r}"


@pytest.mark.parametrize(
    ("function", "kind", "takes"), ENTRY_POINTS, ids=lambda v: getattr(v, "__qualname__", "")
)
def test_every_public_keyword_is_its_declaration(
    function: Callable[..., Any], kind: Kind, takes: str
) -> None:
    parameters, declared = _keyword_only(function), _declared(kind, takes)
    assert set(parameters) == set(declared), "add the keyword to the signature, or declare it"
    for name, parameter in parameters.items():
        _same_keyword(parameter, declared[name])
    table = "EventOptions" if kind == "events" else "IdentityOptions"
    assert inspect.signature(function).parameters["options"].annotation == f"{table} | None"


@pytest.mark.parametrize(("function", "kind"), SCHEMAS, ids=lambda v: getattr(v, "__name__", ""))
def test_the_schemas_keywords_are_declared_ones(function: Callable[..., Any], kind: Kind) -> None:
    declared = _declared(kind, "table")
    for name, parameter in _keyword_only(function).items():
        _same_keyword(parameter, declared[name])


def _typed_dict_keys(typed: Any) -> dict[str, str]:
    hints: dict[str, ForwardRef] = {}
    for base in reversed(typed.__mro__):
        hints.update(getattr(base, "__annotations__", {}))
    return {name: ref.__forward_arg__ for name, ref in hints.items()}


@pytest.mark.parametrize(
    ("typed", "method"),
    [(SendEventsOptions, cc.Client.send_events), (IdentifyOptions, cc.Client.identify)],
    ids=["SendEventsOptions", "IdentifyOptions"],
)
def test_the_one_call_forms_and_tasks_take_the_client_methods_keywords(
    typed: Any, method: Callable[..., Any]
) -> None:
    parameters = inspect.signature(method).parameters
    expected = {n: p.annotation for n, p in parameters.items() if n not in ("self", "data")}
    assert _typed_dict_keys(typed) == expected


def test_the_text_keywords_typed_dict_is_the_text_layout() -> None:
    declared = {o.name: o.annotation for o in options_of(cc.TextFormat)}
    assert _typed_dict_keys(TextOptions) == declared


def _parsers() -> dict[str, argparse.ArgumentParser]:
    main = _cli.build_parser()
    subs = next(a for a in main._actions if isinstance(a, argparse._SubParsersAction))
    return {name: subs.choices[name] for name in ("validate", "send")}


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: a for a in parser._actions for flag in a.option_strings}


def test_every_declared_flag_is_on_the_command_line_and_nothing_else_is_undeclared() -> None:
    parsers = _parsers()
    flags = {flag for parser in parsers.values() for flag in _flags(parser)}
    declared = {o.flag for cls in DECLARING for o in options_of(cls) if o.flag is not None}
    assert declared <= flags
    own = {"-h", "--help", "-v", "--verbose", "-q", "--quiet", "--report", "--results", "--rows"}
    own |= {"--json", "--junit", "--first", "--passed", "--quarantine", "--receipts"}
    own |= {"--sql", "--connection"}  # the input itself, as the positional file is
    assert flags - declared == own, "a flag that sets an option must be declared with it"


def _every_parser() -> list[argparse.ArgumentParser]:
    found, todo = [], [_cli.build_parser()]
    while todo:
        parser = todo.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def test_every_flag_that_sets_an_option_is_made_from_its_declaration() -> None:
    # no command writes such a flag by hand (--concurrency, --base-url, track's
    # --namespace were): one declaration per flag carries its help, the flag comes from it
    helped: dict[str, Option] = {}
    for cls in DECLARING:
        for option in options_of(cls):
            if option.flag is not None and option.declared.help is not None:
                first = helped.setdefault(option.flag, option)
                assert (first.owner, first.name) == (option.owner, option.name), option.flag
    named = {o.flag for cls in DECLARING for o in options_of(cls) if o.flag is not None}
    assert named <= set(helped), "a flag named by a declaration needs one with its help"
    seen = set()
    for parser in _every_parser():
        for flag, action in _flags(parser).items():
            if flag not in named or isinstance(action, argparse._VersionAction):
                continue  # the program's --version is not a table's
            if flag == "--format" and parser.prog.endswith(" validate"):
                continue  # the input's format and the report's in one flag: tested below
            option = helped[flag]
            seen.add(flag)
            assert action.dest == option.name, f"{parser.prog} {flag}"
            assert str(option.declared.help) in str(action.help), f"{parser.prog} {flag}"
            assert action.default is (
                None if option.default is dataclasses.MISSING else option.default
            ) or option.is_default(action.default)
    assert {"--concurrency", "--base-url", "--namespace", "--naive-timezone"} <= seen


def test_each_data_flag_is_spelled_and_checked_as_declared() -> None:
    for name, parser in _parsers().items():
        actions = _flags(parser)
        for option in data_flags():
            if name == "validate" and option.name == "format":
                continue  # validate's --format takes the report's format too: below
            action = actions[str(option.flag)]
            assert action.dest == option.name
            assert option.is_default(action.default), option.name
            assert tuple(action.choices or ()) == (option.choices or ()), option.name
            assert action.metavar == option.declared.metavar, option.name


def test_validates_format_flag_takes_the_declared_input_formats_and_the_reports() -> None:
    action = _flags(_parsers()["validate"])["--format"]
    inputs = next(o for o in options_of(cc.TextFormat) if o.name == "format").choices or ()
    assert set(action.choices or ()) == {*inputs, "text", "json", "github"}


def test_the_gates_keywords_are_its_declared_options() -> None:
    declared = {o.name: (o.annotation, o.default) for o in options_of(GateOptions)}
    for method in (cc.ValidationReport.gate, cc.ValidationReport.to_json):
        parameters = inspect.signature(method).parameters
        found = {n: (str(p.annotation), p.default) for n, p in parameters.items() if n in declared}
        assert found == declared, method.__name__


def test_messages_name_each_option_by_its_declared_flag() -> None:
    declared = {o.name: o.flag for cls in DECLARING for o in options_of(cls) if o.flag}
    assert declared == FLAGS


@pytest.mark.parametrize("kind", ["events", "identities"])
def test_an_option_of_the_other_kind_is_refused_on_the_command_line(
    kind: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.csv"
    path.write_text("external_user_id\nu1\n")
    flag = ["--namespace", "shop"] if kind == "identities" else ["--duplicates", "keep_last"]
    assert _cli.main(["validate", kind, str(path), *flag]) == 3
    other = "events" if kind == "identities" else "identities"
    assert f"{flag[0]}: not for {kind}; these options apply to {other} only" in (
        capsys.readouterr().err
    )


# --------------------------------------------------------------------------- options= whole


def test_options_passed_whole_give_what_the_keywords_give(now: pd.Timestamp) -> None:
    df = pd.DataFrame(
        {
            "USER": ["u1", "u2"],
            "event_type": ["login", "login"],
            "occurred_at": ["2026-01-01 10:00", "bad"],
        }
    )
    keywords: dict[str, Any] = {
        "now": pd.Timestamp("2026-01-02", tz="UTC"),
        "naive_timezone": "Europe/Paris",
        "rename": {"USER": "external_user_id"},
        "namespace": "shop",
    }
    options = cc.EventOptions(**keywords)
    assert cc.events_to_wire(df, options=options) == cc.events_to_wire(df, **keywords)
    by_keywords = cc.validate_events(df, **keywords)
    whole = cc.validate_events(df, options=options)
    assert (whole.n_rows, whole.n_invalid) == (by_keywords.n_rows, by_keywords.n_invalid) == (2, 1)


def test_options_and_a_keyword_beside_them_are_refused() -> None:
    options = cc.EventOptions(naive_timezone="UTC")
    with pytest.raises(cc.ConfigurationError, match=r"namespace= was given too"):
        cc.validate_events(DF, options=options, namespace="shop")
    with pytest.raises(cc.ConfigurationError, match=r"must be a cc\.IdentityOptions"):
        cc.validate_identities(DF, options=options)  # type: ignore[arg-type]


def test_options_made_once_measure_the_window_from_each_call() -> None:
    options = cc.EventOptions()
    assert options.now is None  # resolved when a call builds its schema, not when made
    fresh = pd.DataFrame(
        {
            "external_user_id": ["u"],
            "event_type": ["login"],
            "occurred_at": [pd.Timestamp.now(tz="UTC")],
        }
    )
    assert cc.validate_events(fresh, options=options).ok


def test_mappings_in_options_are_frozen_copies() -> None:
    rename = {"USER": "external_user_id"}
    options = cc.EventOptions(rename=rename)
    rename["OTHER"] = "event_type"
    assert dict(options.rename or {}) == {"USER": "external_user_id"}
    assert hash(options) == hash(cc.EventOptions(rename={"USER": "external_user_id"}))
    with pytest.raises(TypeError):
        options.rename["X"] = "y"  # type: ignore[index]


# --------------------------------------------------------------------------- per-call knobs


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "4"])
@pytest.mark.parametrize("method", ["send_events", "identify"])
def test_max_concurrency_of_a_call_is_checked_not_silently_defaulted(
    client: cc.Client, value: Any, method: str
) -> None:
    send = getattr(client, method)
    with pytest.raises(cc.ConfigurationError, match="max_concurrency must be a whole number"):
        send(DF, max_concurrency=value)


@pytest.mark.parametrize(("value", "message"), [(0, "at least 1"), (501, "between 1 and 500")])
def test_batch_size_of_a_call_is_checked(client: cc.Client, value: int, message: str) -> None:
    with pytest.raises(cc.ConfigurationError, match=f"batch_size.*{message}"):
        client.send_events(DF, batch_size=value)


def test_progress_and_dry_run_must_be_what_they_say(client: cc.Client) -> None:
    with pytest.raises(cc.ConfigurationError, match="progress must be True, False or None"):
        client.send_events(DF, progress="yes")  # type: ignore[arg-type]
    with pytest.raises(cc.ConfigurationError, match="dry_run must be True or False"):
        client.identify(DF, dry_run="no")  # type: ignore[arg-type]


def test_send_partition_refuses_an_unknown_option_before_anything_else() -> None:
    empty = pd.DataFrame({"external_user_id": []})
    with pytest.raises(cc.ConfigurationError, match=r"unknown option\(s\) \['namespce'\]"):
        cc.send_partition(empty, base_url="https://api.example.com", namespce="shop")
    with pytest.raises(cc.ConfigurationError, match=r"\['namespace'\] for kind=identities"):
        cc.send_partition(empty, kind="identities", namespace="shop")


# --------------------------------------------------------------------------- timeouts


def test_timeouts_as_one_value_are_the_flat_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    client = cc.Client("https://api.example.com", "k", timeouts=cc.Timeouts(read=10, deadline=600))
    config = client.config
    assert (config.read_timeout, config.deadline, config.connect_timeout) == (10, 600, 5.0)
    assert config.timeouts == cc.Timeouts(connect=5.0, read=10, request=120.0, deadline=600)
    assert config == cc.Client("https://api.example.com", "k", read_timeout=10, deadline=600).config
    assert "timeouts" not in repr(config)  # the flat fields show them


def test_a_flat_timeout_beside_the_group_must_agree_with_it() -> None:
    group = cc.Timeouts(read=10)
    with pytest.raises(cc.ConfigurationError, match=r"read_timeout=7 and timeouts=.* disagree"):
        cc.Client("https://api.example.com", "k", timeouts=group, read_timeout=7)
    agreed = cc.Client("https://api.example.com", "k", timeouts=group, read_timeout=10)
    assert agreed.config.read_timeout == 10


def test_with_options_takes_the_group_or_the_flat_fields() -> None:
    config = cc.Client("https://api.example.com", "k", read_timeout=7).config
    grouped = config.with_options(timeouts=cc.Timeouts(connect=2))
    assert (grouped.connect_timeout, grouped.read_timeout) == (2, 30.0)  # the group, whole
    assert config.with_options(deadline=None).timeouts.deadline is None
    assert dataclasses.replace(config, read_timeout=9).timeouts.read == 9


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"read": 0}, "must be positive"),
        ({"deadline": -1}, "must be positive"),
        ({"connect": "5"}, "connect_timeout must be a number of seconds"),
    ],
)
def test_bad_timeouts_are_refused_when_made(given: dict[str, Any], message: str) -> None:
    with pytest.raises(cc.ConfigurationError, match=message):
        cc.Timeouts(**given)


def test_timeouts_must_be_a_timeouts_value() -> None:
    with pytest.raises(cc.ConfigurationError, match=r"must be a cc\.Timeouts"):
        cc.Client("https://api.example.com", "k", timeouts={"read": 5})  # type: ignore[arg-type]


def test_every_declaring_class_has_type_hints_the_derivations_can_read() -> None:
    # the derivations read each option's type hint: every declaring class's evaluates
    for cls in DECLARING:
        assert typing.get_type_hints(cls)


def _event_parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [
        (p.name, p.annotation, p.default)
        for p in inspect.signature(function).parameters.values()
        if p.name not in ("self", "base_url", "api_key", "config")
    ]


@pytest.mark.parametrize(
    "function",
    [cc.track, cc.Tracker.track, cc.AsyncClient.track, AsyncTracker.track],
    ids=["cc.track", "Tracker.track", "AsyncClient.track", "AsyncTracker.track"],
)
def test_every_track_form_takes_the_one_events_arguments(function: Callable[..., Any]) -> None:
    # the public signatures are spelled out for readers and editors; this keeps them one
    assert _event_parameters(function) == _event_parameters(cc.Client.track)


def test_the_scalar_engine_takes_what_track_takes() -> None:
    names = [(name, default) for name, _, default in _event_parameters(event_of)]
    assert names == [(name, default) for name, _, default in _event_parameters(cc.Client.track)]


# --------------------------------------------------------------------------- passed on by name

# a value other than the default for each keyword of the public calls (with what it needs
# beside it); a new option needs one here, so the test below follows it through every call
SAMPLES: dict[str, dict[str, Any]] = {
    "naive_timezone": {"naive_timezone": "Europe/Paris"},
    "extra_columns": {"extra_columns": "ignore"},
    "rename": {"rename": {"USER": "external_user_id"}},
    "rename_style": {"rename_style": "snake"},
    "dtypes": {"dtypes": {"n": "int64"}},
    "encoding": {"encoding": "latin-1"},
    "decimals": {"decimals": "str"},
    "slice_rows": {"slice_rows": 7},
    "version": {"version": 3},
    "as_of": {"as_of": pd.Timestamp("2026-01-01", tz="UTC")},
    "snapshot_id": {"snapshot_id": 5},
    "partitioning": {"partitioning": None},
    "plan": {"plan": TrackingPlan({"signup": {"type": "object"}})},
    "delimiter": {"delimiter": ";"},
    "header": {"header": False, "columns": ["a"]},
    "columns": {"header": False, "columns": ["a"]},
    "escape": {"escape": "\\"},
    "null": {"null": "\\N"},
    "quote": {"quote": None},
    "format": {"format": "csv"},
    "now": {"now": pd.Timestamp("2026-01-02", tz="UTC")},
    "epoch_unit": {"epoch_unit": "s"},
    "event_type_style": {"event_type_style": "snake"},
    "namespace": {"namespace": "shop"},
    "id_columns": {"id_columns": ["event_type"]},
    "id_format": {"id_format": "v1"},
    "phone_region": {"phone_region": "US"},
    "blank_consent": {"blank_consent": "omit_channel"},
    "require_consent": {"require_consent": True},
    "duplicates": {"duplicates": "keep_last"},
    "dry_run": {"dry_run": True},
    "ledger": {"ledger": "acknowledged.db"},
    "history": {"history": "runs.sqlite"},
    "alert_webhook": {"alert_webhook": "https://hooks.example.com/services/T0"},
    "alert_invalid": {"alert_invalid": "5%"},
    "new_ids": {"new_ids": True},
    "progress": {"progress": False},
    "batch_size": {"batch_size": 7},
    "max_concurrency": {"max_concurrency": 3},
    # a sync's: each with the cursor it needs (checked when SyncOptions is made)
    "cursor": {"cursor": "occurred_at"},
    "lookback": {"cursor": "occurred_at", "lookback": "2h"},
    "incremental": {"incremental": True},
    "sync_name": {"cursor": "occurred_at", "sync_name": "daily"},
    "full_refresh": {"cursor": "occurred_at", "full_refresh": True},
    "since": {"cursor": "occurred_at", "since": "2026-01-01T00:00:00Z"},
    "until": {"cursor": "occurred_at", "until": "2026-01-02T00:00:00Z"},
}


class _Made(Exception):
    def __init__(self, options: Any) -> None:
        super().__init__("made")
        self.options = options


def _made(data: Any, options: Any) -> Any:
    raise _Made(options)


def _field(options: Any, name: str) -> Any:
    return getattr(options.text if name in cc.TextFormat.__dataclass_fields__ else options, name)


def _recording(cls: type, into: list[Any]) -> type:
    class Recording(cls):  # type: ignore[misc]
        def __post_init__(self) -> None:
            super().__post_init__()
            into.append(self)

    return Recording


@pytest.mark.parametrize(
    ("function", "kind", "takes"), ENTRY_POINTS, ids=lambda v: getattr(v, "__qualname__", "")
)
def test_every_keyword_reaches_its_options_field(
    function: Callable[..., Any], kind: Kind, takes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each keyword is passed on by name (no locals()): one left out would be silently
    # ignored, so each is given alone, off its default, and looked for in the value made
    from churn_connector import _client  # noqa: PLC0415
    from churn_connector._events import api as events_api  # noqa: PLC0415
    from churn_connector._identities import api as identities_api  # noqa: PLC0415

    table = cc.EventOptions if kind == "events" else cc.IdentityOptions
    sends: list[Any] = []
    stream = "EventStream" if kind == "events" else "IdentityStream"
    for module in (_client, events_api if kind == "events" else identities_api):
        monkeypatch.setattr(module, stream, _made)
    monkeypatch.setattr(_client, "SendOptions", _recording(SendOptions, sends))
    syncs: list[Any] = []
    monkeypatch.setattr(_client, "SyncOptions", _recording(SyncOptions, syncs))
    client = cc.Client("https://api.example.com", "k")
    call = getattr(client, function.__name__) if takes == "send" else function
    declared = _declared(kind, takes)
    assert set(declared) <= set(SAMPLES), "give the new option a sample value above"
    for name in declared:
        given = SAMPLES[name]
        sends.clear()
        syncs.clear()
        if name in {o.name for o in options_of(SyncOptions)}:
            # a sync without a ledger stops once its options are made: they are what counts
            with pytest.raises((_Made, cc.ConfigurationError)):
                call(DF, **given)
            (synced,) = syncs
            assert getattr(synced, name) == getattr(SyncOptions(**given), name), name
            assert getattr(synced, name) != getattr(SyncOptions(), name), name
            continue
        with pytest.raises(_Made) as made:
            call(DF, **given)
        if name in {o.name for o in options_of(SendOptions)}:
            (options,) = sends
            expected: Any = SendOptions(**given)
            plain: Any = SendOptions()
        else:
            options = made.value.options
            text = {k: v for k, v in given.items() if k in cc.TextFormat.__dataclass_fields__}
            own = {k: v for k, v in given.items() if k not in text}
            expected = table(**own, text=cc.TextFormat(**text)) if text else table(**own)
            plain = table()
        assert _field(options, name) == _field(expected, name), name
        assert _field(options, name) != _field(plain, name), name


@pytest.mark.parametrize(("function", "kind"), SCHEMAS, ids=lambda v: getattr(v, "__name__", ""))
def test_every_schema_keyword_reaches_its_options_field(
    function: Callable[..., Any], kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = inspect.getmodule(function)
    monkeypatch.setattr(module, "build_schema", lambda options: _made(None, options))
    table = cc.EventOptions if kind == "events" else cc.IdentityOptions
    for name in _keyword_only(function):
        with pytest.raises(_Made) as made:
            function(**SAMPLES[name])
        assert getattr(made.value.options, name) == getattr(table(**SAMPLES[name]), name), name
        assert getattr(made.value.options, name) != getattr(table(), name), name
