"""TrackingPlan: a team's own rules for what events and identities hold, loaded from JSON or
YAML and checked, keyword by keyword, against the supported subset of JSON Schema.

A plan is a mapping::

    events:                       # event type -> a JSON Schema of its properties
      invoice_paid:
        type: object
        required: [amount, currency, plan]
        properties:
          amount: {type: number, minimum: 0}
          currency: {type: string, enum: [usd, eur]}
    identities:                   # optional: a JSON Schema of traits
      properties:
        email: {type: string, format: email}
    unknown_events: refuse        # allow (the default) | warn | refuse

Every keyword of every schema is checked when the plan is loaded: one outside the subset
(``SUPPORTED``; annotations such as ``title`` and ``description`` aside) is a ``PlanError``
naming it and where it is, never ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias, get_args

import orjson

from .._core import PlanError
from .plan_rules import Rules

__all__ = [
    "ANNOTATIONS",
    "SUPPORTED",
    "PlanSource",
    "TrackingPlan",
    "UnknownEvents",
    "as_plan",
]

UnknownEvents = Literal["allow", "warn", "refuse"]
SUPPORTED = (
    "type",
    "required",
    "properties",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "items",
    "minItems",
    "maxItems",
)
"""The keywords of JSON Schema (draft 2020-12) a plan may use."""
ANNOTATIONS = (
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
)
"""Keywords that describe and assert nothing: accepted, and left alone."""
FORMATS = ("date-time", "email")
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_TOP = ("events", "identities", "unknown_events")


class TrackingPlan:
    """A tracking plan: per event type, a JSON Schema of its ``properties``; optionally a
    JSON Schema of identities' ``traits``; and what to do with event types it lacks
    (``unknown_events``: ``"allow"``, the default, ``"warn"`` (sent, and noted in the
    report) or ``"refuse"`` (invalid, check ``plan.unknown_event``)).

    Load one from a file (``TrackingPlan.load("plan.yaml")``, JSON or YAML), or make one
    from mappings. Every keyword is checked now: one outside the supported subset of JSON
    Schema is a :class:`PlanError` naming it. ::

        plan = cc.TrackingPlan(
            events={"invoice_paid": {"properties": {"amount": {"type": "number", "minimum": 0}}}}
        )
        report = cc.validate_events(df, plan=plan)
    """

    def __init__(
        self,
        events: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        identities: Mapping[str, Any] | None = None,
        unknown_events: UnknownEvents = "allow",
        path: str | None = None,
    ) -> None:
        self.path = path
        if unknown_events not in get_args(UnknownEvents):
            raise self._error(
                f"unknown_events must be one of allow, warn, refuse, not {unknown_events!r}",
                "unknown_events",
            )
        self.unknown_events: UnknownEvents = unknown_events
        if events is None:
            events = {}
        if not isinstance(events, Mapping):
            raise self._error(
                "events must map event types to JSON Schemas of their properties, not "
                f"{type(events).__name__}",
                "events",
            )
        checked: dict[str, dict[str, Any]] = {}
        for event_type, schema in events.items():
            if not isinstance(event_type, str) or not event_type:
                raise self._error(f"an event type must be a name, not {event_type!r}", "events")
            where = f"events.{event_type}"
            checked[event_type] = self._schema(schema, where)
        self.events = checked
        self.identities = None if identities is None else self._schema(identities, "identities")
        self._rules = {name: Rules(schema) for name, schema in checked.items()}
        self._traits = None if self.identities is None else Rules(self.identities)

    # -- loading -------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TrackingPlan:
        """The plan in a JSON or YAML file (``.json``: JSON; otherwise YAML, which needs
        PyYAML: ``pip install "churn-connector[yaml]"``)."""
        where = os.fspath(path)
        try:
            text = Path(where).read_bytes()
        except OSError as exc:
            raise PlanError(
                f"tracking plan {where}: cannot be read ({exc.strerror or exc})", path=where
            ) from None
        if where.endswith(".json"):
            try:
                found = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise PlanError(f"tracking plan {where}: not JSON ({exc})", path=where) from None
        else:
            found = _yaml(text, where)
        return cls.from_dict(found, path=where)

    @classmethod
    def from_dict(cls, found: Any, *, path: str | None = None) -> TrackingPlan:
        """A plan from its mapping (as a file holds it)."""
        name = f"tracking plan {path}" if path else "tracking plan"
        if not isinstance(found, Mapping):
            raise PlanError(
                f"{name}: must be a mapping with an events key, not {type(found).__name__}",
                path=path,
            )
        unknown = [k for k in found if k not in _TOP]
        if unknown:
            raise PlanError(
                f"{name}: unknown key {unknown[0]!r} (a plan has events, identities and "
                "unknown_events)",
                path=path,
                where=str(unknown[0]),
            )
        return cls(
            found.get("events"),
            identities=found.get("identities"),
            unknown_events=found.get("unknown_events", "allow"),
            path=path,
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as a mapping (what ``from_dict`` reads)."""
        out: dict[str, Any] = {"events": self.events}
        if self.identities is not None:
            out["identities"] = self.identities
        out["unknown_events"] = self.unknown_events
        return out

    # -- what the checks use --------------------------------------------------------------
    def rules_for(self, event_type: str) -> Rules | None:
        """The compiled schema of an event type's properties (None: the plan lacks it)."""
        return self._rules.get(event_type)

    @property
    def traits_rules(self) -> Rules | None:
        """The compiled schema of identities' traits (None: the plan has none)."""
        return self._traits

    # -- values ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        where = f"{self.path!r}, " if self.path else ""
        return (
            f"TrackingPlan({where}{len(self.events)} event types, identities="
            f"{self.identities is not None}, unknown_events={self.unknown_events!r})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrackingPlan) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS))

    def __reduce__(self) -> tuple[Any, ...]:
        # compiled patterns aside: a plan pickles as its mappings (Spark, Airflow)
        return (_rebuilt, (self.to_dict(), self.path))

    # -- checking keywords ------------------------------------------------------------------
    def _error(self, message: str, where: str, keyword: str | None = None) -> PlanError:
        name = f"tracking plan {self.path}" if self.path else "tracking plan"
        return PlanError(f"{name}: {message}", path=self.path, where=where, keyword=keyword)

    def _schema(self, schema: Any, where: str) -> dict[str, Any]:
        if not isinstance(schema, Mapping):
            raise self._error(f"{where} must be a JSON Schema (a mapping), not {schema!r}", where)
        for keyword, value in schema.items():
            if keyword in ANNOTATIONS:
                continue
            if keyword not in SUPPORTED:
                raise self._error(
                    f"{where}: the keyword {keyword!r} is not in the supported subset of JSON "
                    f"Schema ({', '.join(SUPPORTED)}); it is refused rather than ignored: "
                    "remove it, or write the rule with those keywords "
                    "(docs/guides/tracking-plan.md)",
                    where,
                    keyword,
                )
            self._keyword(keyword, value, f"{where}.{keyword}", schema)
        return dict(schema)

    def _keyword(self, keyword: str, value: Any, where: str, schema: Mapping[str, Any]) -> None:
        def refuse(expected: str) -> PlanError:
            return self._error(f"{where} must be {expected}, not {value!r}", where, keyword)

        if keyword == "type":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
                raise refuse(f"a type name ({', '.join(_TYPES)}) or a list of them")
        elif keyword == "required":
            if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
                raise refuse("a list of property names")
        elif keyword == "properties":
            if not isinstance(value, Mapping):
                raise refuse("a mapping of property names to schemas")
            for key, sub in value.items():
                self._schema(sub, f"{where}.{key}")
        elif keyword == "additionalProperties":
            if not isinstance(value, bool):
                self._schema(value, where)
        elif keyword == "items":
            if isinstance(value, bool | list):
                raise refuse("one schema for every item (prefixItems is not supported)")
            self._schema(value, where)
        elif keyword == "enum":
            if not isinstance(value, list) or not value:
                raise refuse("a non-empty list of values")
        elif keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                hint = (
                    " (draft 4's boolean form is not supported)" if isinstance(value, bool) else ""
                )
                raise refuse(f"a number{hint}")
        elif keyword in ("minLength", "maxLength", "minItems", "maxItems"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise refuse("a whole number, at least 0")
        elif keyword == "pattern":
            if not isinstance(value, str):
                raise refuse("a regular expression")
            try:
                re.compile(value)
            except re.error as exc:
                raise self._error(
                    f"{where}: {value!r} is not a regular expression this package reads ({exc})",
                    where,
                    keyword,
                ) from None
        elif keyword == "format" and value not in FORMATS:
            raise self._error(
                f"{where}: the format {value!r} is not supported (only {', '.join(FORMATS)}); "
                "it is refused rather than ignored",
                where,
                keyword,
            )
        del schema  # every keyword stands on its own


def _rebuilt(found: dict[str, Any], path: str | None) -> TrackingPlan:
    return TrackingPlan.from_dict(found, path=path)


def _yaml(text: bytes, where: str) -> Any:
    try:
        import yaml  # noqa: PLC0415  (an optional extra, for YAML plans only)
    except ImportError:
        raise PlanError(
            f"tracking plan {where}: reading YAML needs PyYAML: pip install "
            '"churn-connector[yaml]" (or write the plan as .json)',
            path=where,
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PlanError(f"tracking plan {where}: not YAML ({exc})", path=where) from None


PlanSource: TypeAlias = "TrackingPlan | str | os.PathLike[str]"
"""A tracking plan: loaded, or the path of its JSON or YAML file."""


def as_plan(plan: Any) -> TrackingPlan | None:
    """``plan`` loaded: a path is read now (so a bad plan fails before anything is read)."""
    if plan is None or isinstance(plan, TrackingPlan):
        return plan
    if isinstance(plan, str | os.PathLike):
        return TrackingPlan.load(plan)
    if isinstance(plan, Mapping):
        return TrackingPlan.from_dict(plan)
    raise PlanError(
        f"plan must be a TrackingPlan or the path of a JSON or YAML plan file, not {plan!r}"
    )
