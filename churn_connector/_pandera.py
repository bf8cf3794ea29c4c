"""pandera, imported once, without the environment variables it sets behind our back.

``import pandera`` sets ``PYARROW_IGNORE_TIMEZONE=1`` (and ``SPARK_LOCAL_IP``) when they are
unset (pandera/external_config.py). With the first one set, pyarrow drops the time zone of
timestamps nested in structs and maps, and ``pa.array([aware datetime])`` shifts the instant:
a tz-aware value inside a property would be reported as naive, or sent at the wrong time.
Every module of the package imports pandera from here, so importing churn_connector leaves
the process environment as it found it (a test checks).
"""

from __future__ import annotations

import os

_SET_BY_PANDERA = ("PYARROW_IGNORE_TIMEZONE", "SPARK_LOCAL_IP")
_before = {name: os.environ.get(name) for name in _SET_BY_PANDERA}

import pandera.pandas as pa  # noqa: E402
from pandera.config import ValidationDepth, config_context  # noqa: E402
from pandera.errors import SchemaErrors  # noqa: E402

for _name, _value in _before.items():
    if _value is None:  # only what pandera added; a value the user set is theirs
        os.environ.pop(_name, None)

__all__ = ["SchemaErrors", "ValidationDepth", "config_context", "pa"]
