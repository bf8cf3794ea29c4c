"""The API key and the headers that carry it: held, compared and used, never shown."""

from __future__ import annotations

import hashlib
from collections.abc import ItemsView, Iterator, Mapping

from .types import AuthHeader

__all__ = ["KEY_HEADERS", "Secret", "SecretHeaders", "as_secret"]

# the request header the API key travels in, by ``auth_header``
KEY_HEADERS: dict[AuthHeader, str] = {"bearer": "Authorization", "x-api-key": "X-API-Key"}


class Secret:
    """A string that does not print itself (repr, str, f-strings, logs, pickles of reprs).

    Everything the package does with the raw key happens in these methods, so no frame of
    ours holds it in a local variable that a traceback-with-locals renderer would print.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, for the one place that must send it."""
        return self._value

    def problem(self) -> str | None:
        """Why this cannot be an API key, without echoing it; None when it can."""
        if not self._value:
            return "the API key is empty"
        if not (self._value.isascii() and self._value.isprintable()) or any(
            ch.isspace() for ch in self._value
        ):
            # e.g. a trailing newline from a secrets file
            return (
                "the API key holds white space, control or non-ASCII characters; "
                "strip it (a trailing newline from a secrets file is the usual cause)"
            )
        return None

    def fingerprint(self) -> str:
        """A short hash that tells keys apart without revealing them."""
        return hashlib.sha256(self._value.encode()).hexdigest()[:16]

    def auth_headers(self, scheme: AuthHeader) -> dict[str, str]:
        """The request header that carries the key."""
        prefix = "Bearer " if scheme == "bearer" else ""
        return {KEY_HEADERS[scheme]: prefix + self._value}

    def scrub(self, text: str, *, cut: bool = False) -> str:
        """``text`` with every occurrence of the key masked (servers may echo headers);
        ``cut``: the text is the start of a longer one, so it may end in the key's first
        characters, masked too."""
        value = self._value
        if value in text:
            text = text.replace(value, "********")
        if cut:
            for n in range(min(len(value) - 1, len(text)), 0, -1):
                if text.endswith(value[:n]):
                    return text[:-n] + "********"
        return text

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def as_secret(value: str | Secret | None) -> Secret | None:
    """Wrap a key at the boundary, so no frame below holds it in a local variable."""
    return Secret(value) if isinstance(value, str) else value


class SecretHeaders:
    """Request headers, some secret: iterable like a mapping for http.client, but neither a
    dict nor a Mapping, so a traceback-with-locals renderer shows only this repr."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def items(self) -> ItemsView[str, str]:
        return self._items.items()

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._items.get(name, default)

    def copy(self) -> SecretHeaders:
        """A copy, still secret (urllib3 copies the headers of each request)."""
        return SecretHeaders(dict(self._items))

    def update(self, other: Mapping[str, str]) -> None:
        self._items.update(other)

    def __repr__(self) -> str:
        return f"SecretHeaders({', '.join(self._items)})"
