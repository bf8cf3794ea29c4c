"""Lets Spark find the ``churn`` data source by itself.

Spark 4 registers, on the first use of a Python data source, the ``DefaultSource`` of every
top-level module named ``pyspark_*`` on the driver's Python path. With churn-connector
installed there, ``df.write.format("churn")`` works without
``churn_connector.spark.register(spark)``.
"""

from __future__ import annotations

import warnings

try:
    from churn_connector.spark import ChurnDataSource as DefaultSource
except Exception as exc:
    # Spark looks up every Python data source in one go: an error here would hide them all
    warnings.warn(f"the churn data source is unavailable: {exc}", stacklevel=1)
else:
    __all__ = ["DefaultSource"]
