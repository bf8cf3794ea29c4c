"""The operators' arguments as the DAG is parsed and as a worker reads them: a tracking plan
kept as a path or as its mapping, a ledger URL that must not carry a password."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from .._core import PlanError
from .._ledger import without_password
from .._validate import TrackingPlan, as_plan

__all__ = ["load_plan", "plan_argument", "refuse_ledger_password"]


def plan_argument(
    operator: str, plan: Any, given: Mapping[str, Any]
) -> tuple[str | None, dict[str, Any] | None]:
    """``plan=`` as the operator keeps it: a path (templated, read on the worker, which
    must see the file), or a plan given in the DAG code, checked now and kept as its
    mapping, which Airflow can serialise with the DAG (and no worker needs a file for)."""
    if plan is not None and given.get("plan") is not None:
        raise TypeError(
            f"{operator}: give the tracking plan once, as plan= or in the options' 'plan', not both"
        )
    if plan is None or isinstance(plan, str | os.PathLike):
        return (None if plan is None else os.fspath(plan)), None
    if isinstance(plan, TrackingPlan | Mapping):
        loaded = as_plan(plan)  # a PlanError now, when the DAG is parsed
        assert loaded is not None
        return None, loaded.to_dict()
    raise TypeError(
        f"{operator}: plan= takes a TrackingPlan, its mapping or the path of its JSON or "
        f"YAML file, not {type(plan).__name__}"
    )


def refuse_ledger_password(send_options: dict[str, Any]) -> None:
    """A password in ``send_options['ledger']`` would be stored with the task's rendered
    fields and shown in its UI: refused, pointing to ``ledger_conn_id``."""
    ledger = send_options.get("ledger")
    if not isinstance(ledger, str):
        return
    try:
        without_password(
            ledger,
            "would be stored with the task's rendered fields and shown in its UI",
            "name an Airflow connection instead (ledger_conn_id=), or set PGPASSWORD on the "
            "workers",
        )
    except ValueError as exc:
        raise AirflowFailException(str(exc)) from None


def load_plan(path: str | None, document: dict[str, Any] | None, where: str) -> TrackingPlan | None:
    """The tracking plan, loaded here, on the worker: the file ``path`` names (rendered),
    or the plan given in the DAG code (kept as its mapping ``document``)."""
    try:
        if document is not None:
            return TrackingPlan.from_dict(document)
        return as_plan(path or None)  # a template left empty: no plan
    except PlanError as exc:  # the plan has to change, not the try
        raise AirflowFailException(f"{where}: {exc}") from None
