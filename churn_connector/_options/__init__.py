"""Options as values, declared once: small frozen objects, validated at the boundary.

``TableOptions`` (``table``) holds what every table is read and validated with;
``EventOptions`` (``events``) and ``IdentityOptions`` (``identities``, with the column
vocabulary of an identities table) add their own. They sit below the wire and the wings,
which all read them. Each field declares its option (``_core.declarations``): the keywords of the
public calls, the command line's flags, the names Spark and Airflow take, and the docs'
options table all come from these fields. The text layout is one value,
``text=TextFormat(...)``, whose fields are keywords of their own.

The public calls keep explicit keywords (IDEs and type checkers see them) and make one
options value of them per call, ``EventOptions.given(locals())``, or take one whole
(``options=``); a bad value (a typo in ``extra_columns``, an unknown zone, a naive ``now``)
fails at once with ``ConfigurationError`` instead of deep inside a run.
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
