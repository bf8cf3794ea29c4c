"""Options given as text, read by their type hints: an Airflow connection's extra, Spark's
``.option(...)`` values, the rendered templates of an operator's ``send_options``."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from .config import ClientConfig, RetryPolicy
from .exceptions import ConfigurationError

# options given as text (an Airflow connection's extra, Spark's .option(...)): the fields of
# ClientConfig (but the URL and the key) and of its RetryPolicy, by name
CLIENT_FIELDS = frozenset(f.name for f in fields(ClientConfig)) - {"base_url", "api_key", "retry"}
RETRY_FIELDS = frozenset(f.name for f in fields(RetryPolicy))
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


def from_text(name: str, value: Any, hint: Any, where: str) -> Any:
    """An option that may arrive as text, read as ``hint`` (``int | None``, ``bool``,
    ``Sequence[str] | None`` as JSON or comma-separated, ``Mapping`` as JSON, ...); a typed
    value passes as it is (the option's own checks judge it). ``where`` names the source
    in errors ("connection extra", "option")."""
    if not isinstance(value, str):
        return value
    args = typing.get_args(hint)
    kinds = {typing.get_origin(a) or a for a in args if a is not type(None)} or {
        typing.get_origin(hint) or hint
    }
    text = value.strip()
    if text.lower() in ("null", "none") and type(None) in args:
        return None  # e.g. deadline=none: no deadline
    try:
        if bool in kinds:
            if text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            raise ValueError(text)
        if int in kinds:
            return int(text)
        if float in kinds:
            return float(text)
        if Mapping in kinds:
            parsed = json.loads(text, object_pairs_hook=_unique)
            if not isinstance(parsed, dict):
                raise ValueError(text)
            return parsed
        if Sequence in kinds:
            if text.startswith("["):
                items = json.loads(text)
                if not isinstance(items, list):
                    raise ValueError(text)
                return items
            return [item.strip() for item in text.split(",") if item.strip()]
    except _RepeatedKey as exc:
        raise ConfigurationError(
            f"{where} {name!r}: repeated_key: {value!r} names the key {exc.key!r} twice in one "
            "object: which value is meant is a guess; keep the key once"
        ) from None
    except ValueError:
        raise ConfigurationError(f"{where} {name!r}: cannot read {value!r} as {hint}") from None
    return text


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of option text, refused when it names a key twice (RFC 8259 leaves the
    value to each reader: ``{"a": "int64", "a": "str"}`` is a guess either way)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def keyword_from_text(name: str, value: Any, hint: Any, where: str) -> Any:
    """A keyword that may arrive as text (an Airflow template renders to a string) read as
    ``hint``, unless the hint takes text itself (``str``, a ``Literal``, ``Any``): then
    the text is the value, as written."""
    if not isinstance(value, str) or _takes_text(hint):
        return value
    return from_text(name, value, hint, where)


def _takes_text(hint: Any) -> bool:
    if hint is str or hint is Any or typing.get_origin(hint) is typing.Literal:
        return True
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return union and any(_takes_text(arg) for arg in typing.get_args(hint))


def client_options_from(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """ClientConfig and RetryPolicy fields by name (text or typed) as :class:`Client` keyword
    options, the retry fields as one ``retry`` policy. Every name must be one of
    ``CLIENT_FIELDS | RETRY_FIELDS``: the caller says what other names mean."""
    client_hints = typing.get_type_hints(ClientConfig)
    retry_hints = typing.get_type_hints(RetryPolicy)
    options: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for key, value in values.items():
        if key in RETRY_FIELDS:
            retry[key] = from_text(key, value, retry_hints[key], where)
        else:
            options[key] = from_text(key, value, client_hints[key], where)
    if retry:
        try:
            options["retry"] = RetryPolicy(**retry)
        except TypeError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
    return options
