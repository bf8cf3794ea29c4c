"""pandera, imported once, without the side effects its import has on the process.

``import pandera`` sets ``PYARROW_IGNORE_TIMEZONE=1`` and ``SPARK_LOCAL_IP=127.0.0.1`` when
they are unset (pandera/external_config.py). With the first one set, pyarrow drops the time
zone of timestamps nested in structs and maps, and ``pa.array([aware datetime])`` shifts the
instant: a tz-aware value inside a property would be reported as naive, or sent at the wrong
time. With the second, a Spark driver started later in the same process binds and advertises
127.0.0.1, which executors on other hosts cannot reach.

When PySpark is installed, pandera also tries ``import pyspark.pandas`` (on import, and again
in ``backends/pandas/builtin_checks.py``, which it loads at the first validation). Under
pandas 3, PySpark warns ``FutureWarning: PySpark does not yet fully support pandas >= 3.0.0``
and the import fails, which pandera expects and swallows; but under ``-W error`` (pytest's
``filterwarnings = error``, a careful CI) the warning is raised instead, and importing this
package, or its first validation, fails. We never use pyspark.pandas: that one warning is
silenced while pandera loads, and the lazily loaded module is loaded here, under the same
filter.

Every module of the package imports pandera from here, so importing churn_connector leaves
the process environment as it found it, and warns about nothing (tests check both).
"""

from __future__ import annotations

import os
import warnings

_SET_BY_PANDERA = ("PYARROW_IGNORE_TIMEZONE", "SPARK_LOCAL_IP")
_before = {name: os.environ.get(name) for name in _SET_BY_PANDERA}

with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    import pandera.backends.pandas.builtin_checks  # noqa: F401 - see the docstring
    import pandera.pandas as pa
    from pandera.config import ValidationDepth, config_context
    from pandera.errors import SchemaErrors

for _name, _value in _before.items():
    if _value is None:  # only what pandera added; a value the user set is theirs
        os.environ.pop(_name, None)

__all__ = ["SchemaErrors", "ValidationDepth", "config_context", "pa"]
