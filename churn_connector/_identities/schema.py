"""The pandera schema of a raw identities table (docs/reference/tables.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pandas as pd

from .._core import (
    ADDRESS_WORDS,
    CHANNELS,
    BlankConsent,
    ExtraColumns,
    named,
    option,
    shown,
    type_name,
)
from .._options import (
    ADDRESS_COLUMNS,
    CONSENT_COLUMNS,
    EMAIL_PATTERN,
    FLAGS,
    PUSH_COLUMNS,
    USER_ID,
    IdentityOptions,
)
from .._validate import (
    EXPLAIN_KEY,
    OWNERS_KEY,
    Explain,
    SchemaBuilder,
    elementwise,
    fullmatch,
    is_text_dtype,
    not_blank,
    pa,
    strings_ok,
    unknown_column,
)
from .._wire import (
    FLAG_SPELLINGS,
    blank_cells,
    channels_problems,
    channels_repeat,
    channels_shape,
    email_addresses,
    flag_values,
    has_address,
    has_both_push_columns,
    items_without_consent,
    no_duplicate_items,
    phone_addresses,
)

_FLAT_TRAITS = r"^traits\..+$"
# frame-level checks: pandera reports them once per column (row-level) or under the schema
# name (table-level); each is reported once, under the column it concerns
_CHECK_COLUMN = {
    "traits_key_conflict": "traits",
    "channels_duplicate_item": "channels",
    "push_token_alias_conflict": "pushToken",
    **{f"{flag}_without_address": flag for flag in FLAGS},
    **{f"{column}_blank": column for column in CONSENT_COLUMNS.values()},
    **{f"{column}_required": column for column in CONSENT_COLUMNS.values()},
}


def _flags_ok(s: pd.Series) -> pd.Series:
    """Booleans, integer (or float) 0/1, or the flag words; see ``channels.flag_values``."""
    return pd.Series(flag_values(s)[1], index=s.index)


def _texts_only(test: Callable[[pd.Series], pd.Series]) -> Callable[[pd.Series], pd.Series]:
    """A check of the text cells: a column of numbers (or other non-text) passes, so it is
    reported once, by its ``_type`` check, not as a check that could not run."""

    def check(s: pd.Series) -> pd.Series:
        if is_text_dtype(s) or pd.api.types.is_object_dtype(s.dtype):
            return test(s)
        return pd.Series(True, index=s.index)

    return check


@_texts_only
def _emails_ok(s: pd.Series) -> pd.Series:
    """Valid addresses once surrounding white space is trimmed (non-strings pass here)."""
    trimmed = pd.Series(email_addresses(s), index=s.index, dtype=object)
    matched = fullmatch(trimmed, EMAIL_PATTERN).to_numpy(dtype=bool)
    is_str = s.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
    return pd.Series(matched | ~is_str, index=s.index)


def _channel_in(s: pd.Series) -> pd.Series:
    is_str = s.map(lambda v: isinstance(v, str)) if s.dtype == object else s.notna()
    return s.isin(CHANNELS) | ~is_str.astype(bool)


def _strings(checks: SchemaBuilder, prefix: str, explain: Explain | None = None) -> pa.Check:
    return checks.add(
        f"{prefix}_type",
        strings_ok,
        explain or (lambda c, v: f"{c} must be text, got {shown(v)} ({type_name(v)})"),
    )


def _phone_not_text(column: str | None, value: Any) -> str:
    example = "phone must be text in E.164 form, e.g. '+14155550123'"
    if isinstance(value, int | float | np.number) and not isinstance(value, bool | np.bool_):
        return (
            f"{example}, got the number {shown(value)}: a number cannot hold the leading + "
            "(or a leading zero), so a number column loses them; cast the column to text"
        )
    return f"{example}, got {shown(value)} ({type_name(value)}): cast the column to text"


def _phone_column(checks: SchemaBuilder, region: str | None) -> pa.Column:
    @_texts_only
    def ok(s: pd.Series) -> pd.Series:
        found = np.array([a is not None for a in phone_addresses(s, region)], dtype=bool)
        is_str = s.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
        return pd.Series(found | ~is_str, index=s.index)

    def explain(column: str | None, value: Any) -> str:
        international = isinstance(value, str) and value.lstrip().startswith("+")
        if international and region is None:
            return (
                f"phone {value!r} is not an E.164 number: + and the country code, then 2-15 "
                "digits in all (spaces, dots, dashes and parentheses between groups are "
                "fine, a trunk (0) is not: +44 20 7946 0000, not +44 (0)20 7946 0000)"
            )
        if region is None:
            return (
                f"phone {value!r} has no +country code: write it in E.164 (e.g. "
                f"+14155550100), or pass {option('phone_region', 'US')} (the ISO code of its "
                "country) to read national numbers"
            )
        return (
            f"phone {value!r} is neither E.164 (e.g. +14155550100) nor a valid phone number "
            f"in region {region}: fix it, or give it in international form"
        )

    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            _strings(checks, "phone", _phone_not_text),
            checks.add("phone_e164", ok, explain),
        ],
    )


def _push_column(checks: SchemaBuilder) -> pa.Column:
    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            _strings(checks, "push_token"),
            checks.add(
                "push_token_not_blank",
                not_blank,
                lambda c, v: f"{c} must not be empty or blank: fill it, or leave the cell null",
            ),
        ],
    )


def _flag_column(checks: SchemaBuilder, flag: str) -> pa.Column:
    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            checks.add(
                f"{flag}_type",
                _flags_ok,
                lambda c, v: (
                    f"{c} must be a flag or empty, got {shown(v)} ({type_name(v)}); accepted: "
                    f"{FLAG_SPELLINGS}"
                ),
            )
        ],
    )


def _channels_column(checks: SchemaBuilder, *, require_consent: bool) -> pa.Column:
    required = []
    if require_consent:
        required.append(
            checks.add(
                "channels_opted_in_required",
                lambda s: elementwise(s, lambda v: not items_without_consent(v)),
                lambda c, v: "; ".join(
                    f"channels[{i}] ({channel}) has no opted_in and "
                    f"{option('require_consent')}: give it opted_in true or false, or drop "
                    f"{named('require_consent')} (the API's default, opted in, then applies)"
                    for i, channel in items_without_consent(v)
                ),
            )
        )
    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            *required,
            checks.add(
                "channels_type",
                lambda s: elementwise(s, lambda v: channels_shape(v) is None),
                lambda c, v: (
                    f"{channels_shape(v)}; each item is an object with channel, "
                    "address and optionally opted_in, verified"
                ),
            ),
            checks.add(
                "channels_item",
                lambda s: elementwise(s, lambda v: not channels_problems(v)),
                lambda c, v: "; ".join(channels_problems(v)),
            ),
            checks.add(
                "repeated_key",
                lambda s: elementwise(s, lambda v: not channels_repeat(v)),
                checks.repeated_key_message,
            ),
        ],
    )


def _frame_check(
    checks: SchemaBuilder, name: str, fn: Callable[[pd.DataFrame], Any], explain: Explain
) -> pa.Check:
    """A frame-level check: a bool (table-level) or a bool per row."""
    return checks.add(name, cast("Callable[[pd.Series], pd.Series]", fn), explain)


def _table_checks(checks: SchemaBuilder, options: IdentityOptions) -> list[pa.Check]:
    region, blank_consent = options.phone_region, options.blank_consent
    alias = _frame_check(
        checks,
        "push_token_alias_conflict",
        lambda df: not has_both_push_columns(df),
        lambda c, v: "both push_token and pushToken columns are given: keep one of them",
    )
    duplicate_items = _frame_check(
        checks,
        "channels_duplicate_item",
        lambda df: no_duplicate_items(df, region, blank_consent),
        lambda c, v: (
            "the same (channel, address) would be sent twice in this row's channels (an item "
            "of the channels column repeats another, or one built from email/phone/push_token): "
            "keep one of them"
        ),
    )
    return [
        *checks.conflicts("traits"),
        alias,
        duplicate_items,
        *_orphan_flags(checks),
        *_consent_checks(checks, options),
    ]


def _consent_checks(checks: SchemaBuilder, options: IdentityOptions) -> list[pa.Check]:
    """A blank consent cell beside an address is not consent (``consent``'s docstring)."""
    out = []
    for channel, column in CONSENT_COLUMNS.items():
        if options.blank_consent == "error":
            out.append(_blank_consent_check(checks, channel, column))
        if options.require_consent:
            out.append(_required_consent_check(checks, channel, column))
    return out


def _blank_consent_check(checks: SchemaBuilder, channel: str, column: str) -> pa.Check:
    def ok(df: pd.DataFrame) -> pd.Series:
        if column not in df.columns:
            return pd.Series(True, index=df.index)
        bad = has_address(df, channel) & blank_cells(df[column])
        return pd.Series(~bad, index=df.index)

    def explain(c: str | None, v: Any) -> str:
        return (
            f"{column} is blank on a row with {ADDRESS_WORDS[channel]}: a blank cell is not "
            "consent. Fill it with true or false, or choose what a blank means: "
            f"{option('blank_consent', 'omit_channel')} (leave the {channel} channel out of the "
            f"request; the API keeps what it holds) or {option('blank_consent', 'opted_in')}"
        )

    return _frame_check(checks, f"{column}_blank", ok, explain)


def _required_consent_check(checks: SchemaBuilder, channel: str, column: str) -> pa.Check:
    def ok(df: pd.DataFrame) -> pd.Series:
        if column in df.columns:
            return pd.Series(True, index=df.index)
        return pd.Series(~has_address(df, channel), index=df.index)

    def explain(c: str | None, v: Any) -> str:
        return (
            f"this row has {ADDRESS_WORDS[channel]} but the table has no {column} column, and "
            f"require_consent=True: add {column} (true or false per row), or drop "
            "require_consent (the contract's default, opted in, then applies)"
        )

    return _frame_check(checks, f"{column}_required", ok, explain)


def _orphan_flag_check(checks: SchemaBuilder, flag: str, columns: tuple[str, ...]) -> pa.Check:
    def ok(df: pd.DataFrame) -> bool:
        return flag not in df.columns or any(c in df.columns for c in columns)

    def explain(column: str | None, value: Any) -> str:
        return (
            f"column {flag} is given but there is no {' or '.join(columns)} column with the "
            f"address it applies to: add that column, or drop {flag}"
        )

    return _frame_check(checks, f"{flag}_without_address", ok, explain)


def _orphan_flags(checks: SchemaBuilder) -> list[pa.Check]:
    """A flag column without its address column could never be sent: say so, not drop it."""
    return [
        _orphan_flag_check(checks, f"{channel}_{suffix}", columns)
        for channel, columns in ADDRESS_COLUMNS.items()
        for suffix in ("opted_in", "verified")
    ]


def identities_schema(
    *,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    phone_region: str | None = None,
    blank_consent: BlankConsent = "error",
    require_consent: bool = False,
) -> pa.DataFrameSchema:
    """The pandera schema of a raw identities table (the docs' input tables).

    ``phone_region`` (e.g. ``"US"``) also accepts local phone numbers that are valid in that
    region; ``extra_columns="ignore"`` lets unknown columns through (they are never sent);
    ``blank_consent`` and ``require_consent`` as for ``validate_identities``.
    """
    return build_schema(
        IdentityOptions(
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            phone_region=phone_region,
            blank_consent=blank_consent,
            require_consent=require_consent,
        )
    )


def build_schema(options: IdentityOptions) -> pa.DataFrameSchema:
    """The identities schema for validated options."""
    region = options.phone_region
    checks = SchemaBuilder(options.rules)
    email_checks = [
        _strings(checks, "email"),
        checks.add(
            "email_pattern",
            _emails_ok,
            lambda c, v: f"email {v!r} is not a valid email address (name@domain.tld)",
        ),
    ]
    preferred_checks = [
        _strings(checks, "preferred_channel"),
        checks.add(
            "preferred_channel_value",
            _channel_in,
            lambda c, v: f"preferred_channel {shown(v)} must be email, sms or push (or empty)",
        ),
    ]
    columns: dict[str, pa.Column] = {
        USER_ID: checks.user_id(),
        "traits": checks.object_column("traits"),
        _FLAT_TRAITS: checks.flat_column("trait"),
        "preferred_channel": pa.Column(nullable=True, required=False, checks=preferred_checks),
        "email": pa.Column(nullable=True, required=False, checks=email_checks),
        "phone": _phone_column(checks, region),
        **{column: _push_column(checks) for column in PUSH_COLUMNS},
        **{flag: _flag_column(checks, flag) for flag in FLAGS},
        "channels": _channels_column(checks, require_consent=options.require_consent),
    }
    checks.explain["column_in_schema"] = unknown_column("traits", columns)
    return pa.DataFrameSchema(
        columns,
        strict=options.extra_columns == "error",
        checks=_table_checks(checks, options),
        name="identities",
        metadata={EXPLAIN_KEY: checks.explain, OWNERS_KEY: {**checks.owners, **_CHECK_COLUMN}},
    )
