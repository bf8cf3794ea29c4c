"""The Airflow provider: ``ChurnHook`` (a ``churn`` Connection → a Client),
``SendEventsOperator`` and ``IdentifyOperator``, ``ValidateOperator`` (the data-quality
gate), and ``churn_asset`` (what the sends deliver, to schedule DAGs on). Needs
``pip install churn-connector[airflow]`` (Airflow 3.3.1+).

Names load on first use: Airflow's provider discovery imports ``churn_connector.airflow.
provider`` (this package's ``__init__`` first) early, before Airflow itself is ready, so
nothing here may import Airflow at import time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assets import churn_asset
    from .hook import ChurnHook
    from .operators import ChurnSendKilled, IdentifyOperator, SendEventsOperator
    from .validate import ValidateOperator

_LAZY = {
    "ChurnHook": ".hook",
    "ChurnSendKilled": ".operators",
    "churn_asset": ".assets",
    "IdentifyOperator": ".operators",
    "SendEventsOperator": ".operators",
    "ValidateOperator": ".validate",
}

__all__ = [
    "ChurnHook",
    "ChurnSendKilled",
    "IdentifyOperator",
    "SendEventsOperator",
    "ValidateOperator",
    "churn_asset",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'churn_connector.airflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
