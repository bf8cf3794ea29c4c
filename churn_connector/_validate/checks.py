"""The closed vocabulary of validation failures: every ``check`` name, what it means, the fix.

A failure's ``check`` column only ever holds a name registered here (``failure_record``
refuses any other), so users can filter on names that stay stable across releases. The
docs' table of checks (docs/reference/checks.md) is generated from this registry::

    python -m churn_connector._validate.checks --update docs/reference/checks.md
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .._core import ADDRESS_WORDS, CHANNELS


@dataclass(frozen=True)
class CheckInfo:
    """One registered check: what it verifies and how a user fixes a failure."""

    name: str
    applies_to: str  # "events", "identities" or "both"
    rule: str
    fix: str


def _checks() -> list[CheckInfo]:
    both, events, ids = "both", "events", "identities"
    out = [
        CheckInfo("column_in_dataframe", both, "a required column is missing", "add it"),
        CheckInfo(
            "column_in_schema",
            both,
            "an unknown column (nothing is dropped silently)",
            "drop it, prefix it with properties./traits., or pass extra_columns='ignore'",
        ),
        CheckInfo("column_name", both, "a column name UTF-8 cannot encode", "rename it"),
        CheckInfo(
            "line_cells",
            both,
            "a CSV/TSV line has as many cells as the header",
            "quote cells that hold the delimiter; add the missing cells",
        ),
        CheckInfo(
            "quote_closed",
            both,
            "a quoted CSV/TSV cell is closed before the file ends",
            "close the quote (a quote inside a quoted cell is written twice), or export the "
            "file again if it was cut short",
        ),
        CheckInfo(
            "truncated",
            both,
            "a text file (CSV, TSV, NDJSON) that ends without a final newline ends with a "
            "whole record: not short of cells, not inside a quoted cell or a JSON object",
            "export the file again: it was cut short (a whole last line without its newline "
            "is only a note in the report, as a cut value cannot be told from a whole one)",
        ),
        CheckInfo(
            "quote_escaped",
            both,
            'a quoted CSV/TSV cell holds no backslash-escaped quote (`\\"`) followed by more '
            "of the cell, unless escape= says the file escapes quotes so",
            "pass `escape='\\\\'` (`--escape '\\'`), as Spark writes; else write a quote "
            'inside a quoted cell twice (`""`)',
        ),
        CheckInfo(
            "null_marker",
            both,
            "a CSV/TSV cell is not `\\N` (null in Snowflake, Redshift, Hive and MySQL exports) "
            "unless null= says what it means",
            "pass `null='\\\\N'` (`--null '\\N'`) if it means null; `null=['', '\\\\N']` "
            "keeps empty cells null too",
        ),
        CheckInfo(
            "partition_mismatch",
            both,
            "a column a part file holds agrees with its key=value folder (Hive partitions)",
            "fix the file or move it to the folder of its value; partitioning=None reads the "
            "files' own columns only",
        ),
        CheckInfo(
            "cursor_null",
            both,
            "in an incremental sync, a row's cursor column holds a value (a row without one "
            "belongs to no run: it is read, and reported, by every run)",
            "fill the cursor at the source, or leave such rows out in the query (WHERE "
            "cursor IS NOT NULL) or coalesce them (COALESCE(updated_at, created_at))",
        ),
        CheckInfo("column_unique", both, "a column name appears twice", "keep one"),
        CheckInfo("not_nullable", both, "a required cell is empty", "fill it or drop the row"),
        CheckInfo(
            "external_user_id_type",
            both,
            "the id is a string or an integer (never a float)",
            "cast the column to Int64 or to string",
        ),
        CheckInfo("external_user_id_not_blank", both, "the id is not blank", "fill it"),
        CheckInfo("event_type_type", events, "event_type is a string", "cast the column to string"),
        CheckInfo(
            "event_type_pattern",
            events,
            "event_type fully matches ^[a-z0-9]+(?:_[a-z0-9]+)*$",
            "lower-case snake_case, no spaces or trailing newline",
        ),
        CheckInfo(
            "occurred_at_type",
            events,
            "a datetime or a timestamp text (an epoch number only with epoch_unit)",
            "pass epoch_unit='s'|'ms'|'us'|'ns' for epoch numbers",
        ),
        CheckInfo(
            "occurred_at_format",
            events,
            "a timestamp of a real date in an accepted spelling (docs: input tables, timestamps)",
            "write it like 2026-11-20T09:30:00.123+01:00",
        ),
        CheckInfo(
            "occurred_at_zone_name",
            events,
            "the time zone is an offset or UTC, not a name (EST and CST are ambiguous)",
            "write the offset: 2026-11-20T09:30:00-05:00",
        ),
        CheckInfo(
            "occurred_at_naive",
            events,
            "the time has a zone (none is guessed)",
            "pass naive_timezone='<IANA zone>' if the column is local time",
        ),
        CheckInfo(
            "occurred_at_local_time",
            events,
            "a local time that exists once in naive_timezone (not skipped or repeated by DST)",
            "give it an explicit offset",
        ),
        CheckInfo(
            "occurred_at_window",
            events,
            "within now − 30 days .. now + 5 minutes",
            "send recent events only",
        ),
        CheckInfo(
            "properties_json",
            events,
            "properties is a dict or a JSON-object string with JSON-exact values",
            "the message names the path of the bad value",
        ),
        CheckInfo(
            "repeated_key",
            both,
            "no JSON object names a key twice (in properties, context or traits text, an NDJSON "
            "line, an Arrow map), at any depth, whatever the values (RFC 8259: readers differ)",
            "keep the key once; the message names the key and where it is",
        ),
        CheckInfo(
            "property_value_json",
            events,
            "a properties.<key> cell has an exact JSON form",
            "convert it to str, int, float or bool",
        ),
        CheckInfo(
            "float_beyond_2_53",
            both,
            "a float column (numpy or pandas dtype) holds no value beyond ±2^53, where a float "
            "no longer holds every integer: a reader that turns an int64 column with nulls "
            "into float64 (pandas' default) changes such numbers, and the event's message id",
            'read the file with dtype_backend="pyarrow" (or with pyarrow, or the command line), '
            "which keeps integers; a column of real floats that large: an Arrow float column",
        ),
        CheckInfo(
            "properties_key_conflict",
            events,
            "a key is not set both in properties and in a properties.<key> column",
            "keep one of them",
        ),
        CheckInfo(
            "context_json",
            events,
            "context is a dict or a JSON-object string with JSON-exact values",
            "the message names the path of the bad value",
        ),
        CheckInfo(
            "context_value_json",
            events,
            "a context.<key> cell has an exact JSON form",
            "convert it to str, int, float or bool",
        ),
        CheckInfo(
            "context_key_conflict",
            events,
            "a key is not set both in context and in a context.<key> column",
            "keep one of them",
        ),
        CheckInfo(
            "context_reserved_key",
            events,
            "context does not carry $message_id",
            "put it in a message_id column",
        ),
        CheckInfo(
            "context_reserved_column",
            events,
            "no context.$message_id column",
            "name it message_id",
        ),
        CheckInfo("message_id_type", events, "message_id is a string", "cast it to string"),
        CheckInfo(
            "message_id_not_blank",
            events,
            "message_id is not empty",
            "fill it, or drop the column to use hashed ids",
        ),
        CheckInfo(
            "message_id_conflict",
            events,
            "one message id is not used for two different events (here or, with a ledger, "
            "in an earlier run)",
            "give each event its own id",
        ),
        CheckInfo(
            "traits_json",
            ids,
            "traits is a dict or a JSON-object string with JSON-exact values",
            "the message names the path of the bad value",
        ),
        CheckInfo(
            "trait_value_json",
            ids,
            "a traits.<key> cell has an exact JSON form",
            "convert it to str, int, float or bool",
        ),
        CheckInfo(
            "traits_key_conflict",
            ids,
            "a key is not set both in traits and in a traits.<key> column",
            "keep one of them",
        ),
        CheckInfo(
            "preferred_channel_type", ids, "preferred_channel is a string", "cast it to string"
        ),
        CheckInfo(
            "preferred_channel_value",
            ids,
            "preferred_channel is email, sms or push (or empty)",
            "use one of those, or leave it empty",
        ),
        CheckInfo("email_type", ids, "email is a string", "cast it to string"),
        CheckInfo("email_pattern", ids, "email is a valid address (name@domain.tld)", "correct it"),
        CheckInfo(
            "phone_type",
            ids,
            "phone is text (E.164 starts with +, which a number cannot hold)",
            "cast the column to text and write +<country><number>",
        ),
        CheckInfo(
            "phone_e164",
            ids,
            "phone is E.164 (or valid in phone_region)",
            "write +<country><number>, or pass phone_region='US'",
        ),
        CheckInfo("push_token_type", ids, "the push token is a string", "cast it to string"),
        CheckInfo("push_token_not_blank", ids, "the push token is not blank", "fill it"),
        CheckInfo(
            "push_token_alias_conflict",
            ids,
            "not both push_token and pushToken columns",
            "keep one of them",
        ),
        CheckInfo(
            "channels_type",
            ids,
            "channels is a list of objects",
            "each item: channel, address, optionally opted_in, verified",
        ),
        CheckInfo(
            "channels_item",
            ids,
            "each channel item follows the contract (2.3): 'channel', never 'type'",
            "the message names the item and field",
        ),
        CheckInfo(
            "channels_duplicate_item",
            ids,
            "one (channel, address) appears once per row",
            "keep one of them",
        ),
        CheckInfo(
            "external_user_id_duplicate",
            ids,
            "one row per user",
            "dedupe, or pass duplicates='keep_last' / 'in_order'",
        ),
        CheckInfo(
            "external_user_id_last_row_invalid",
            ids,
            "with duplicates='keep_last', the user's last row is valid",
            "fix that row (an older one is never sent instead)",
        ),
    ]
    out.append(
        CheckInfo(
            "channels_opted_in_required",
            ids,
            "with require_consent=True, each channels item has opted_in",
            "give each item opted_in true or false, or drop require_consent",
        )
    )
    for channel in CHANNELS:
        out.append(
            CheckInfo(
                f"{channel}_opted_in_blank",
                ids,
                f"a row with {ADDRESS_WORDS[channel]} has a filled {channel}_opted_in cell "
                "(a blank is not consent)",
                "fill it with true or false, or pass blank_consent='omit_channel' (leave the "
                "channel out) or 'opted_in'",
            )
        )
        out.append(
            CheckInfo(
                f"{channel}_opted_in_required",
                ids,
                f"with require_consent=True, a row with {ADDRESS_WORDS[channel]} comes with "
                f"a {channel}_opted_in column",
                f"add the {channel}_opted_in column, or drop require_consent (the contract's "
                "default, opted in, then applies)",
            )
        )
        for flag in ("opted_in", "verified"):
            name = f"{channel}_{flag}"
            out.append(
                CheckInfo(
                    f"{name}_type",
                    ids,
                    f"{name} is a boolean, 0/1, or true/false, t/f, yes/no, y/n (any case)",
                    "write one of those, or leave it empty",
                )
            )
            out.append(
                CheckInfo(
                    f"{name}_without_address",
                    ids,
                    f"{name} comes with the column holding the {channel} address",
                    "add that column, or drop the flag",
                )
            )
    return [*out, *_plan_checks()]


UNKNOWN_EVENT = "plan.unknown_event"
PLAN_PREFIX = "plan."

# the keywords of a tracking plan (docs/guides/tracking-plan.md): what a value breaks
_PLAN_RULES = {
    "type": "is of the type the plan gives",
    "required": "a property the plan requires is there",
    "additionalProperties": "with additionalProperties false, no property the plan lacks",
    "enum": "is one of the plan's values",
    "const": "is the plan's one value",
    "minimum": "a number at least the plan's minimum",
    "maximum": "a number at most the plan's maximum",
    "exclusiveMinimum": "a number above the plan's exclusiveMinimum",
    "exclusiveMaximum": "a number below the plan's exclusiveMaximum",
    "minLength": "a string at least minLength characters long",
    "maxLength": "a string at most maxLength characters long",
    "pattern": "a string the plan's pattern matches (searched, not anchored)",
    "format": "a string of the plan's format (date-time: RFC 3339; email: name@domain.tld)",
    "minItems": "an array of at least minItems items",
    "maxItems": "an array of at most maxItems items",
}


def _plan_checks() -> list[CheckInfo]:
    """A plan's checks, one family a keyword: a failure's check is named for its rule,
    ``plan.<event type>.<property path>.<keyword>`` (``plan.traits...`` for identities),
    and belongs to the family ``plan.<keyword>`` registered here."""
    fix = "fix the value, or the rule in the tracking plan"
    out = [
        CheckInfo(f"plan.{keyword}", "both", f"tracking plan: {rule}", fix)
        for keyword, rule in _PLAN_RULES.items()
    ]
    out.append(
        CheckInfo(
            UNKNOWN_EVENT,
            "events",
            "with unknown_events: refuse, the event type is in the tracking plan",
            "add the event type to the plan, or fix the row's event type",
        )
    )
    return out


CHECKS: dict[str, CheckInfo] = {c.name: c for c in _checks()}


def family(name: str) -> str:
    """The registered check a name belongs to: itself, or for a plan rule's name
    (``plan.invoice_paid.amount.minimum``) its keyword's family (``plan.minimum``)."""
    if name in CHECKS or not name.startswith(PLAN_PREFIX):
        return name
    return PLAN_PREFIX + name.rpartition(".")[2]


def info(name: str) -> CheckInfo:
    """The registry's entry of a check (a plan rule's: its family's)."""
    return CHECKS[family(name)]


def is_registered(name: str) -> bool:
    return family(name) in CHECKS


def require(name: str) -> str:
    """``name`` if it is registered; an error for the developer otherwise."""
    if not is_registered(name):
        raise AssertionError(
            f"check {name!r} is not registered in churn_connector._validate.checks"
        )
    return name


def markdown_table() -> str:
    """The docs' table of checks (docs/reference/checks.md)."""
    lines = ["| check | applies to | rule | fix |", "|---|---|---|---|"]
    for info in CHECKS.values():
        fix = info.fix.replace("|", "\\|")
        rule = info.rule.replace("|", "\\|")
        lines.append(f"| `{info.name}` | {info.applies_to} | {rule} | {fix} |")
    return "\n".join(lines)


_BLOCK = re.compile(r"(<!-- checks:start -->\n).*?(<!-- checks:end -->)", re.DOTALL)


def readme_with_table(text: str) -> str:
    """``text`` with the block between the checks markers replaced by the current table."""
    return _BLOCK.sub(lambda m: m.group(1) + markdown_table() + "\n" + m.group(2), text)


def main(argv: list[str] | None = None) -> int:
    """Print the checks table, or rewrite it in a file: ``--update FILE``. (No argparse:
    importing it would cost every ``import churn_connector`` some 6 ms.)"""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(markdown_table())
        return 0
    if len(args) != 2 or args[0] != "--update":
        print("usage: checks.py [--update FILE]  (print or update the docs' checks table)")
        return 2
    path = Path(args[1])
    path.write_text(readme_with_table(path.read_text()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
