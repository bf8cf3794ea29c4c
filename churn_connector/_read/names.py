"""Names as warehouses and trackers write them, and ours: styles that map one to the other
(``rename_style``, ``event_type_style``) and the near misses behind "did you mean".

A style is the caller's explicit choice; nothing is renamed without it. ``lower`` lower-cases
a column name (``EVENT_TYPE`` -> ``event_type``); ``snake`` also splits camelCase and turns
spaces and punctuation into ``_`` (``External User ID``, ``externalUserId`` ->
``external_user_id``). In a ``properties.`` / ``context.`` / ``traits.`` column only the
prefix is restyled: the key after it is data the API stores (and part of the message id),
so it stays as written.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import Literal

NameStyle = Literal["lower", "snake"]
NAME_STYLES: tuple[NameStyle, ...] = ("lower", "snake")
NESTED = ("properties", "context", "traits")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[\W_]+")
# names other tools give our columns (Segment, Mixpanel, HubSpot, Salesforce exports),
# squashed; suggested only where that column is one of the table's
_SYNONYMS = {
    "externaluserid": (
        "userid",
        "user",
        "recordid",
        "contactid",
        "customerid",
        "distinctid",
        "accountid",
    ),
    "eventtype": ("event", "eventname", "name", "action", "type"),
    "occurredat": ("timestamp", "time", "ts", "eventtime", "createdat", "sentat", "date"),
    "phone": ("phonenumber", "mobile", "mobilephone", "mobilenumber", "cell", "telephone"),
    "email": ("emailaddress", "mail"),
    "pushtoken": ("devicetoken", "token", "fcmtoken", "apnstoken"),
    "messageid": ("eventid", "insertid", "uuid"),
}


def snake(text: str) -> str:
    """``Order Completed``, ``orderCompleted``, ``order-completed`` -> ``order_completed``."""
    return _SEPARATORS.sub("_", _CAMEL.sub("_", text)).strip("_").lower()


def word_styler(style: NameStyle) -> Callable[[str], str]:
    """``style`` for one word (an event type): ``snake`` or lower-casing."""
    return snake if style == "snake" else str.lower


def styler(style: NameStyle) -> Callable[[str], str]:
    """The column-name function of ``style`` (keys after a nested prefix kept)."""
    word = word_styler(style)

    def restyle(name: str) -> str:
        head, dot, key = name.partition(".")
        if dot and head.lower() in NESTED:
            return head.lower() + dot + key
        return word(name)

    return restyle


def squashed(name: str) -> str:
    """A name without case, spaces, punctuation or underscores: ``Phone Number`` ->
    ``phonenumber``."""
    return _SEPARATORS.sub("", name).casefold()


def near_misses(name: str, known: Iterable[str]) -> list[str]:
    """The known names ``name`` was probably meant to be (best first, at most three)."""
    known = list(known)
    shapes = {squashed(k): k for k in known}
    shape = squashed(name)
    if not shape:
        return []
    if shape in shapes:
        return [shapes[shape]]
    for prefix in NESTED:
        # "properties_plan", "Properties Plan": a flattened key without its dot
        flat = re.fullmatch(rf"{prefix}[\W_]+(\w.*)", name, re.IGNORECASE)
        if prefix in known and flat:
            return [f"{prefix}.{flat.group(1)}"]
    found = [shapes[k] for k, others in _SYNONYMS.items() if k in shapes and shape in others]
    if found:
        return found
    # one contains the other ("phonenumber" and "phone", "userid" and "externaluserid")
    found = [
        k for s, k in shapes.items() if min(len(s), len(shape)) >= 4 and (s in shape or shape in s)
    ]
    if found:
        return sorted(found, key=lambda k: abs(len(squashed(k)) - len(shape)))[:3]
    close = difflib.get_close_matches(shape, list(shapes), n=3, cutoff=0.8)
    return [shapes[s] for s in close]
