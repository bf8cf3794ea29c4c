"""Options as values, declared once: small frozen objects, validated at the boundary.

``TableOptions`` (``table``) holds what every table is read and validated with;
``EventOptions`` (``events``) and ``IdentityOptions`` (``identities``, with the column
vocabulary of an identities table) add their own. They sit below the wire and the wings,
which all read them. Each field declares its option (``_core.declarations``): the keywords of the
public calls, the command line's flags, the names Spark and Airflow take, and the docs'
options table all come from these fields. The text layout is one value,
``text=TextFormat(...)``, whose fields are keywords of their own.

The public calls keep explicit keywords (IDEs, type checkers and ``help()`` see them) and
pass each to its field by name, ``EventOptions(now=now, ...)``: one options value per call,
so an editor's "find usages" follows a keyword from the signature to where it is read.
``EventOptions.chosen`` takes that value, or ``options=`` passed whole. A bad value (a typo
in ``extra_columns``, an unknown zone, a naive ``now``) fails at once with
``ConfigurationError`` instead of deep inside a run.
"""

from __future__ import annotations

from .events import WIRE_FIELDS, EventOptions
from .identities import (
    ADDRESS_COLUMNS,
    CONSENT_COLUMNS,
    E164_PATTERN,
    EMAIL_PATTERN,
    FLAGS,
    ITEM_FIELDS,
    PUSH_COLUMNS,
    USER_ID,
    IdentityOptions,
)
from .table import TableOptions, one_of, utc_now

__all__ = [
    "ADDRESS_COLUMNS",
    "CONSENT_COLUMNS",
    "E164_PATTERN",
    "EMAIL_PATTERN",
    "FLAGS",
    "ITEM_FIELDS",
    "PUSH_COLUMNS",
    "USER_ID",
    "WIRE_FIELDS",
    "EventOptions",
    "IdentityOptions",
    "TableOptions",
    "one_of",
    "utc_now",
]
