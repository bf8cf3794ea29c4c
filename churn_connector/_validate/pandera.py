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

pandera is imported at the first use of ``pa``, not with the package: it is most of the
package's import time (and, with PySpark installed, imports PySpark too), and the CLI's
``--help``, the sandbox, the Airflow provider's discovery and a Spark driver do not need it.
"""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

_SET_BY_PANDERA = ("PYARROW_IGNORE_TIMEZONE", "SPARK_LOCAL_IP")
_lock = threading.Lock()
_loaded: ModuleType | None = None


def _load() -> ModuleType:
    global _loaded
    with _lock:  # reader and sender threads may meet here; pandera is imported once
        if _loaded is None:
            before = {name: os.environ.get(name) for name in _SET_BY_PANDERA}
            with warnings.catch_warnings():
                warnings.filterwarnings(
                    "ignore",
                    message="PySpark does not yet fully support pandas",
                    category=FutureWarning,
                )
                # deliberately lazy (see the docstring); builtin_checks: see the docstring
                importlib.import_module("pandera.backends.pandas.builtin_checks")
                module = importlib.import_module("pandera.pandas")
            for name, value in before.items():
                if value is None:  # only what pandera added; a value the user set is theirs
                    os.environ.pop(name, None)
            _loaded = module
        return _loaded


class _Pandera:
    """``pandera.pandas``, imported when an attribute is first read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_load(), name)


@contextmanager
def full_validation() -> Iterator[None]:
    """Validation on, schema and data, whatever ``PANDERA_VALIDATION_ENABLED`` or
    ``PANDERA_VALIDATION_DEPTH`` say: turning pandera off must not turn us off."""
    _load()  # first, so that pandera.config comes without pandera's side effects
    config = importlib.import_module("pandera.config")
    with config.config_context(
        validation_enabled=True, validation_depth=config.ValidationDepth.SCHEMA_AND_DATA
    ):
        yield


def schema_errors() -> type[SchemaErrors]:
    """pandera's ``SchemaErrors`` (lazily, as ``pa``)."""
    errors: type[SchemaErrors] = _load().errors.SchemaErrors
    return errors


if TYPE_CHECKING:
    import pandera.pandas as pa
    from pandera.errors import SchemaErrors
else:
    pa = _Pandera()

__all__ = ["full_validation", "pa", "schema_errors"]
