"""A tracking plan applied to the rows of one slice that meet the contract: each event type's
rows checked together against its compiled schema, each failure a record like the
contract's (row, column, check, value, message), its check named for the rule it breaks
(``plan.invoice_paid.amount.minimum``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from .._core import Kind, shown
from .._json import ValueRules, arrow_backed, contiguous
from .checks import UNKNOWN_EVENT
from .columns import (
    flat_columns,
    is_struct,
    is_text_dtype,
    merged_objects,
    scalar_column,
)
from .failure_log import failure_record
from .plan import TrackingPlan
from .plan_rules import MISSING, Found, Members, Rules

__all__ = ["PlanFindings", "objects_of", "plan_failures", "rule_name"]


@dataclass
class PlanFindings:
    """What the plan found in one slice: failure ``records`` (positions in the book),
    ``invalid`` (positions within the slice) and, with ``unknown_events="warn"``, the rows
    of each event type the plan lacks (sent)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    invalid: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    unknown: Counter[str] = field(default_factory=Counter)


def rule_name(scope: str, path: str, keyword: str) -> str:
    """The check's name: ``plan.<event type or traits>.<path>.<keyword>``."""
    return f"plan.{scope}.{path}.{keyword}" if path else f"plan.{scope}.{keyword}"


def plan_failures(
    plan: TrackingPlan,
    kind: Kind,
    frame: pd.DataFrame,
    rows: np.ndarray,
    rules: ValueRules,
    start: int,
    labels: pd.Index,
) -> PlanFindings:
    """Check ``rows`` (positions within ``frame``, a slice starting at ``start`` in the
    book) against ``plan``."""
    out = PlanFindings()
    if not len(rows):
        return out
    found: dict[tuple[int, str], dict[str, Any]] = {}
    column = "traits" if kind == "identities" else "properties"
    if kind == "identities":
        traits = plan.traits_rules
        if traits is not None:
            values = _Values(frame, rows, column, rules)
            _check(traits, values, slice(0, len(rows)), rows, "traits", start, labels, found)
    else:
        all_codes, uniques = pd.factorize(frame["event_type"], use_na_sentinel=False)
        codes = all_codes[rows]
        # the rows in order of their event type: each type's rows are one range of them
        order = np.argsort(codes, kind="stable")
        rows, codes = rows[order], codes[order]
        bounds = np.searchsorted(codes, np.arange(len(uniques) + 1))
        values = _Values(frame, rows, column, rules)
        for k, event_type in enumerate(uniques):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            if lo == hi:
                continue
            mine = slice(lo, hi)
            compiled = plan.rules_for(str(event_type))
            if compiled is not None:
                _check(compiled, values, mine, rows[mine], str(event_type), start, labels, found)
            elif plan.unknown_events == "warn":
                out.unknown[str(event_type)] += hi - lo
            elif plan.unknown_events == "refuse":
                message = (
                    f"event type {event_type!r} is not in the tracking plan, which refuses "
                    "unknown events (plan: unknown_events refuse): add it to the plan, or fix "
                    "the event type"
                )
                for p in rows[mine].tolist():
                    found[p, UNKNOWN_EVENT] = failure_record(
                        labels[p], start + p, "event_type", UNKNOWN_EVENT, event_type, message
                    )
    if found:
        out.records = sorted(found.values(), key=lambda r: r["position"])
        out.invalid = np.unique(np.fromiter((p for p, _ in found), np.int64, len(found)))
    return out


class _Values:
    """The ``column`` objects of the checked rows, made once (as columns, or as objects)
    when a check first asks, and handed out for a selection of those rows."""

    def __init__(
        self, frame: pd.DataFrame, rows: np.ndarray, column: str, rules: ValueRules
    ) -> None:
        prefix = column + "."
        mine = [c for c in frame.columns if c == column or str(c).startswith(prefix)]
        self.part = frame[mine].iloc[rows]
        self.column, self.rules = column, rules
        self._members: Members | None = None
        self._ends: dict[str, np.ndarray] = {}  # per key: present values before each row
        self._made = False
        self._objects: np.ndarray | None = None

    def members(self, selected: slice) -> Members | None:
        """The members of a range of the rows (views, nothing copied)."""
        if not self._made:
            self._members, self._made = _members(self.part, self.column, self.rules), True
            for key, (present, _) in (self._members or {}).items():
                self._ends[key] = np.concatenate(([0], np.cumsum(present)))
        if self._members is None:
            return None
        lo, hi = selected.start, selected.stop
        return {
            k: (p[lo:hi], v[self._ends[k][lo] : self._ends[k][hi]])
            for k, (p, v) in self._members.items()
        }

    def objects(self, selected: slice) -> np.ndarray:
        if self._objects is None:
            self._objects = np.empty(len(self.part), dtype=object)
            self._objects[:] = _objects(self.part, self.column, self.rules)
        return self._objects[selected]


def _check(
    compiled: Rules,
    values: _Values,
    selected: slice,
    rows: np.ndarray,
    scope: str,
    start: int,
    labels: pd.Index,
    found: dict[tuple[int, str], dict[str, Any]],
) -> None:
    """Check the objects of ``rows`` (``selected`` of the checked rows): column by column
    where the values come in columns (flat columns, an Arrow struct of plain fields), each
    JSON text parsed once, one object at a time otherwise."""
    column = values.column
    failures: list[Found] = []
    members = values.members(selected) if compiled.takes_members else None
    if members is not None:
        compiled.check_members(members, rows, failures)
    else:
        compiled.check(values.objects(selected), rows, failures)
    for f in failures:
        check = rule_name(scope, f.path, f.keyword)
        where = f"{column}.{f.path}" if f.path else column
        about = f"event type {scope}" if column == "properties" else "identities"
        for p, value in zip(f.rows.tolist(), f.values, strict=True):
            if (p, check) in found:
                continue  # one failure of a rule a row (an array's items may break it often)
            absent = value is MISSING
            said = f"{where} {f.why}" if absent else f"{where} {shown(value)} {f.why}"
            message = (
                f"{said} (plan: {f.rule}, {about}): fix the value, or the rule in the tracking plan"
            )
            found[p, check] = failure_record(
                labels[p], start + p, where, check, None if absent else value, message
            )


def objects_of(part: pd.DataFrame, column: str, rules: ValueRules) -> list[Any]:
    """Each row's ``column`` object as the plan's per-object checks see it (what ``plan
    infer`` drafts from)."""
    return _objects(part, column, rules)


def _objects(part: pd.DataFrame, column: str, rules: ValueRules) -> list[Any]:
    """Each row's object: JSON text parsed once (no flat columns beside it), or the wire's
    own merge of the object and its flat columns."""
    s = part.get(column)
    if isinstance(s, pd.Series) and is_text_dtype(s) and not flat_columns(part, column):
        try:
            # the rows met the contract: each text is one exact JSON object (or null)
            texts = s.tolist()
            if not s.hasnans:  # the common case: a text every row, parsed in one map
                return list(map(orjson.loads, texts))
            return [orjson.loads(t) if type(t) is str else {} for t in texts]
        except orjson.JSONDecodeError:
            pass  # an integer beyond 64 bits: the exact reader below
    return merged_objects(part, column, rules)


_PLAIN = (
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_boolean,
    pa.types.is_string,
    pa.types.is_large_string,
)


def _members(part: pd.DataFrame, column: str, rules: ValueRules) -> Members | None:
    """The objects' members as columns, key -> (present, the present values), when the
    values come in columns of plain values: flat columns alone, or an Arrow struct of
    plain fields (a null field is omitted, as the wire's v2 omits it); else None."""
    flats = flat_columns(part, column)
    if column not in part.columns:
        out: Members = {}
        for name in flats:
            values, _ = scalar_column(part[name], name, rules)
            found = np.empty(len(values), dtype=object)
            found[:] = values
            present = np.not_equal(found, MISSING).astype(bool)
            out[name[len(column) + 1 :]] = (present, found[present])
        return out
    s = part[column]
    if not flats and is_text_dtype(s):
        return _text_members(s)
    if flats or not rules.v2 or not is_struct(s):
        return None
    return _struct_members(contiguous(s))


def _struct_members(struct: pa.Array) -> Members | None:
    """The members of an Arrow struct of plain fields (a null field: absent), else None."""
    if not all(any(test(f.type) for test in _PLAIN) for f in struct.type):
        return None
    out: Members = {}
    for i, f in enumerate(struct.type):
        field = pc.struct_field(struct, [i])  # null where the struct is
        present = field.is_valid().to_numpy(zero_copy_only=False)
        values = field.drop_null().to_numpy(zero_copy_only=False).astype(object)
        out[f.name] = (present, values)
    return out


# what sends a text column to the per-object path instead: a null (a JSON null is a value,
# which a struct cannot tell from an absent key), a nested object or array (no plain
# field), a line break (the texts are read as lines) or a long digit run (an integer
# beyond 64 bits, which Arrow would read as a rounded double)
_NOT_FLAT = r"null|\n|\{.*\{|\[|\d{16}"


def _text_members(s: pd.Series) -> Members | None:
    """Flat JSON-object texts as columns: Arrow's JSON reader parses them all at once (no
    Python object a row); None for texts it cannot read exactly (``_NOT_FLAT``)."""
    try:
        texts = pa.array(s, pa.large_string()) if not arrow_backed(s) else contiguous(s)
    except (pa.ArrowException, TypeError):
        return None
    if texts.null_count or not len(texts):
        return None
    if pc.any(pc.match_substring_regex(texts, _NOT_FLAT)).as_py():
        return None
    if texts.type != pa.large_string():
        texts = texts.cast(pa.large_string())
    newline = pa.scalar("\n", pa.large_string())
    lines = pc.binary_join_element_wise(texts, newline, pa.scalar("", pa.large_string()))
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)
    start = int(offsets[lines.offset])
    end = int(offsets[lines.offset + len(lines)])
    data = lines.buffers()[2]
    try:
        table = pa_json.read_json(
            pa.BufferReader(data.slice(start, end - start)),
            read_options=pa_json.ReadOptions(block_size=max(1 << 20, end - start + 1)),
        )
    except (pa.ArrowException, ValueError):
        return None
    if table.num_rows != len(texts):
        return None
    struct = (
        pa.StructArray.from_arrays(
            [c.combine_chunks() for c in table.columns], names=table.column_names
        )
        if table.num_columns
        else None
    )
    if struct is None:
        return {}
    return _struct_members(struct)
