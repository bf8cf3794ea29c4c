"""The Dagster integration: ``pip install "churn-connector[dagster]"``.

* :class:`ChurnResource`: the API as a ``ConfigurableResource`` (the key from an
  ``EnvVar``); its ``send_events`` / ``identify`` send an asset's table and return a
  ``MaterializeResult`` with the counts, requests and result files as metadata;
* :func:`churn_check`: the API contract as a (blocking) asset check, ERROR above a
  threshold of invalid rows, WARN below;
* :func:`summary_metadata`: a run's summary as Dagster metadata, for your own assets.
"""

from __future__ import annotations

from .checks import churn_check, invalid_limit
from .resource import ChurnResource, summary_metadata

__all__ = ["ChurnResource", "churn_check", "invalid_limit", "summary_metadata"]
