"""SendEventsOperator and IdentifyOperator: validate and deliver a table from an Airflow task.

Input, ``source``: a path, a folder of part files or a URI (templated, e.g.
``"/exports/{{ ds }}/events/"``), or an upstream task's output (``source=extract()``), a
DataFrame passed through XCom. An upstream output is not a template field: Airflow stores
rendered template fields in its database, and a DataFrame there would copy row values out
of the warehouse. Or a query, ``sql=`` (templated) on the Airflow connection ``conn_id=``,
read through that connection (:mod:`churn_connector.airflow.query`: ADBC for PostgreSQL and
SQLite, DuckDB, else the connection's own ``DbApiHook``), its password staying in the
connection.

Incremental, ``cursor=`` (templated; ``send_options`` take ``lookback``, ``sync_name``, ...):
with a ledger, each run reads the rows past the sync's watermark; without one, the DAG run's
data interval bounds the cursor (``data_interval_start <= cursor < data_interval_end``), so a
backfill of past intervals reads exactly their rows (``send_options`` ``since`` / ``until``
override it).

Output: the result files (``<kind>_chunks.csv``, ``<kind>_rows.parquet``) in a folder per
run, task and try (``results_dir``, templated), and a small JSON summary as the task's XCom:
counts, requests, elapsed time, file paths. Never data, never the key: the key comes only
from the Connection (``ChurnHook``) and is no argument of these operators.

Lineage: each send declares the outlet asset ``churn://<connection id>/<kind>``
(:mod:`churn_connector.airflow.assets`), whose event carries the run's counts, and reports
OpenLineage facets on completion and on failure (:mod:`churn_connector.airflow.lineage`,
with Airflow's OpenLineage provider installed).

The task fails with the run's summary when valid rows were not delivered, and, with
``fail_on_invalid=True``, when rows were invalid (or expired). Failures a retry cannot mend
(the exception's ``retryable`` is False: the key refused, an untrusted certificate, bad
options, a broken input, invalid or rejected rows) fail without retrying.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import Asset, BaseHook, BaseOperator, XComArg
from airflow.sdk.exceptions import AirflowFailException

from .._client import send_keywords
from .._core import (
    ChurnConnectorError,
    ConfigurationError,
    DeliveryError,
    Interrupted,
    Kind,
    RunStopped,
    keyword_from_text,
)
from .._ledger import Ledger, redact, scheme_of
from .._results import (
    SendResult,
    append_line,
    now_utc,
    receipt_line,
    receipts_path,
    stopped_receipt,
)
from .._tasks import Recorded, record
from .._validate import TrackingPlan
from .arguments import load_plan, plan_argument, refuse_ledger_password
from .assets import asset_extra, churn_asset
from .hook import ChurnHook, base_url_from, ledger_from_connection
from .provider import DEFAULT_CONN_ID
from .query import bound_by_interval, check_inputs, query_lineage, query_of_connection

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context

__all__ = ["DEFAULT_RESULTS_DIR", "ChurnSendKilled", "IdentifyOperator", "SendEventsOperator"]

# One folder per dag run, task (and map index) and try: a retry never overwrites the files
# of the try before it, and two runs never share a folder. Rendered where the task runs.
DEFAULT_RESULTS_DIR = (
    "{{ task.results_base }}/{{ dag.dag_id }}/"
    "{{ run_id | replace(':', '_') | replace('+', '_') | replace('/', '_') | replace('..', '_') }}"
    "/{{ task.task_id }}{% if ti.map_index >= 0 %}/map_{{ ti.map_index }}{% endif %}"
    "/try_{{ ti.try_number }}"
)


class ChurnSendKilled(BaseException):
    """Raised in the task's main thread by ``on_kill`` to stop a send in progress.

    A BaseException, like Airflow's own AirflowTaskTimeout, so no ``except Exception`` on
    the way swallows it; the package then abandons the requests in flight, accounts for
    every row and raises :class:`churn_connector.Interrupted` with the results.
    """


def _is_location(value: Any) -> bool:
    """A path or URI, or a list of them: what may be a (rendered) template field."""
    if isinstance(value, str | os.PathLike):
        return True
    return isinstance(value, list | tuple) and all(isinstance(v, str | os.PathLike) for v in value)


class _ChurnSendOperator(BaseOperator):
    """What both operators share; see the module's docstring."""

    _kind: ClassVar[Kind]  # what it sends: the result files' prefix, the Client method
    _delivers: ClassVar[bool] = False  # sends to the API: an outlet asset, an output dataset
    template_fields: Sequence[str] = (
        "source",
        "sql",
        "conn_id",
        "cursor",
        "results_dir",
        "send_options",
        "receipts",
        "plan",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"send_options": "json", "sql": "sql"}
    ui_color = "#e8f1fb"

    def __init__(
        self,
        *,
        source: str | os.PathLike[str] | Sequence[str] | XComArg | None = None,
        sql: str | None = None,
        conn_id: str | None = None,
        cursor: str | None = None,
        churn_conn_id: str = DEFAULT_CONN_ID,
        send_options: dict[str, Any] | None = None,
        client_options: dict[str, Any] | None = None,
        results_dir: str | None = DEFAULT_RESULTS_DIR,
        results_base: str | None = None,
        fail_on_invalid: bool = False,
        ledger_conn_id: str | None = None,
        receipts: str | bool = True,
        plan: TrackingPlan | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._delivers:
            # what this task delivered, for DAGs scheduled on it (assets.py)
            given = kwargs.get("outlets") or []
            given = list(given) if isinstance(given, list | tuple) else [given]
            kwargs["outlets"] = [*given, churn_asset(self._kind, churn_conn_id)]
        super().__init__(**kwargs)
        if ledger_conn_id is not None and (send_options or {}).get("ledger") is not None:
            raise TypeError(
                f"{type(self).__name__}: give the ledger once, as ledger_conn_id= or as "
                "send_options['ledger'], not both"
            )
        ledger = (send_options or {}).get("ledger")
        if not (isinstance(ledger, str) and "{{" in ledger):  # a template: once rendered
            refuse_ledger_password(send_options or {})
        self._upstream: XComArg | None = None
        self._lineage_summary: dict[str, Any] | None = None  # the last try's, for lineage
        self._base_url: str | None = None
        check_inputs(type(self).__name__, source, sql, conn_id, cursor, send_options)
        self.sql = sql
        self.conn_id = conn_id
        self.cursor = cursor
        if sql is not None:
            self.source: Any = None
        elif isinstance(source, XComArg):
            # resolved in execute(), never rendered: see the module's docstring
            self._upstream = source
            XComArg.apply_upstream_relationship(self, source)
            self.source = None
        elif _is_location(source):
            self.source = source
        else:
            raise TypeError(
                f"{type(self).__name__}: source= takes a path, folder or URI (a template), or "
                f"an upstream task's output (source=extract()), not {type(source).__name__}: "
                "a table in DAG code would be stored in Airflow's database"
            )
        self.churn_conn_id = churn_conn_id
        self.send_options = dict(send_options or {})
        self.client_options = dict(client_options or {})
        self.results_dir = results_dir
        self._results_base = results_base
        self.fail_on_invalid = fail_on_invalid
        self.ledger_conn_id = ledger_conn_id
        # True: receipts.jsonl in results_dir; a path: that file (or folder); False: none
        self.receipts = receipts
        self._sending = False
        self._main_thread: int | None = None
        self.plan, self.plan_document = plan_argument(type(self).__name__, plan, self.send_options)

    def _plan(self, where: str) -> TrackingPlan | None:
        return load_plan(self.plan, self.plan_document, where)

    @property
    def results_base(self) -> str:
        """Where the default results folders go: ``results_base=``, else the environment's
        ``CHURN_RESULTS_BASE``, else ``$AIRFLOW_HOME/churn_results`` (read on the worker)."""
        if self._results_base:
            return self._results_base
        home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
        return os.environ.get("CHURN_RESULTS_BASE") or os.path.join(home, "churn_results")

    def render_template_fields(
        self, context: Context, jinja_env: jinja2.Environment | None = None
    ) -> None:
        super().render_template_fields(context, jinja_env)
        # a ledger URL whose template put a password in it must not be stored either
        try:
            refuse_ledger_password(self.send_options)
        except AirflowFailException:
            self.send_options = {**self.send_options, "ledger": redact(self.send_options["ledger"])}
            raise
        # a native-object template (render_template_as_native_obj) can render a table; it
        # must not reach the rendered fields Airflow stores next
        if not (self.source is None or _is_location(self.source)):
            kind = type(self.source).__name__
            self.source = None
            raise AirflowFailException(
                f"source rendered to a {kind}, not a path: pass an upstream task's output as "
                "source=extract() instead of pulling it in a template"
            )

    def execute(self, context: Context) -> dict[str, Any]:
        self._lineage_summary = None
        data = self._input(context)
        try:
            client = ChurnHook(self.churn_conn_id, **self.client_options).get_conn()
        except ConfigurationError as exc:
            raise AirflowFailException(f"churn connection {self.churn_conn_id!r}: {exc}") from None
        self._base_url = client.config.base_url
        send: Callable[..., SendResult] = (
            client.send_events if self._kind == "events" else client.identify
        )
        options = self._send_options()
        plan = self._plan(f"churn {self._kind}")
        if plan is not None:
            options["plan"] = plan
        if self.cursor:
            options["cursor"] = self.cursor
        if bound_by_interval(self._kind, options, context, self.ledger_conn_id):
            self.log.info(
                "churn %s: cursor %s bounded by the data interval [%s, %s)",
                self._kind,
                options["cursor"],
                options["since"],
                options["until"],
            )

        ledger = options.get("ledger")
        opened: Ledger | None = None
        if self.ledger_conn_id is not None:
            opened = self._ledger_of_connection(dry_run=bool(options.get("dry_run")))
            options["ledger"] = opened  # an open Ledger: the password stays in it
        elif (
            isinstance(ledger, str | os.PathLike)
            and scheme_of(ledger) is None
            and not options.get("dry_run")
        ):
            # a per-DAG or per-task ledger path (templated) on a fresh volume
            Path(ledger).parent.mkdir(parents=True, exist_ok=True)

        def send_while_killable() -> SendResult:
            self._main_thread, self._sending = threading.get_ident(), True
            try:
                return send(data, **options)
            finally:
                self._sending = False

        try:
            recorded = record(self._kind, send_while_killable, self.results_dir or None)
        except ConfigurationError as exc:  # a send option the package refuses
            raise AirflowFailException(f"churn {self._kind}: {exc}") from None
        finally:
            if opened is not None:
                opened.close()
        summary = {
            **recorded.summary(),
            "results_dir": self.results_dir or None,
            "try_number": context["ti"].try_number,
        }
        receipt = self._write_receipt(recorded, context)
        if receipt is not None:
            summary["files"] = {**summary.get("files", {}), "receipts": receipt}
        self._lineage_summary = summary
        failure = self._failure(recorded)
        if failure is not None:
            self.log.error("churn %s: the task fails; summary %s", self._kind, summary)
            try:
                context["ti"].xcom_push(key="churn_summary", value=summary)
            except Exception:  # the failure says more than a missing summary
                self.log.exception("churn %s: could not push the summary", self._kind)
            raise failure
        for note in summary.get("notes", ()):
            self.log.info("churn %s: note: %s", self._kind, note["message"])
        counts = summary["counts"]
        if counts.get("invalid") or counts.get("expired") or counts.get("held"):
            self.log.warning(
                "churn %s: %d invalid, %d expired and %d held rows were not sent (see %s)",
                self._kind,
                counts.get("invalid", 0),
                counts.get("expired", 0),
                counts.get("held", 0),
                recorded.files.get("rows", "the rows file: results_dir is off"),
            )
        if self._delivers:
            context["outlet_events"][
                churn_asset(self._kind, self.churn_conn_id)
            ].extra = asset_extra(summary)
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage's view of the run (lineage.py): called by Airflow's OpenLineage
        provider after the task succeeded."""
        return self._lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """As on completion, with what the failed try counted (nothing if it read nothing)."""
        return self._lineage()

    def _lineage(self) -> Any:
        # the OpenLineage provider (apache-airflow-providers-openlineage) is optional, and
        # only it calls this
        from . import lineage  # noqa: PLC0415

        upstream = None
        producer = getattr(self._upstream, "operator", None)  # a PlainXComArg's task
        if producer is not None:
            uris = [o.uri for o in producer.outlets if isinstance(o, Asset)]
            upstream = (self.dag_id, str(producer.task_id), uris)
        output = None
        if self._delivers:
            output = (lineage.api_namespace(self._api_url()), self._kind)
        checks, severity = self._lineage_quality()
        inputs = lineage.input_datasets(self.source, upstream)
        if self.sql is not None and self.conn_id is not None:
            inputs = query_lineage(self.conn_id, self.sql)
        return lineage.operator_lineage(
            inputs=inputs,
            output=output,
            summary=self._lineage_summary,
            checks=checks,
            severity=severity,
        )

    def _lineage_quality(self) -> tuple[dict[str, int], str]:
        """(rows that failed each check, when known; the invalid rows' severity)."""
        return {}, "error" if self.fail_on_invalid else "warn"

    def _api_url(self) -> str:
        """The API's base URL: the client's, or (a try that failed before it had one) the
        connection's; else the connection's name, so lineage still names a place."""
        if self._base_url is not None:
            return self._base_url
        try:
            conn = BaseHook.get_connection(self.churn_conn_id)
            return base_url_from(conn.host, conn.port, conn.schema)
        except Exception:
            return f"churn://{self.churn_conn_id}"

    def _write_receipt(self, recorded: Recorded, context: Context) -> str | None:
        """Append the run's receipt (``receipts``): counts and ids, never data or the key."""
        target = self.receipts
        if target is True:
            target = self.results_dir or ""
        if not target:
            return None
        if recorded.result is not None:
            made = recorded.result.receipt(command="airflow")
        else:
            assert recorded.error is not None
            started = now_utc() - dt.timedelta(seconds=recorded.elapsed_s)
            made = stopped_receipt("airflow", self._kind, recorded.error, started)
        ti = context["ti"]
        made["airflow"] = {
            "dag_id": ti.dag_id,
            "task_id": ti.task_id,
            "run_id": ti.run_id,
            "try_number": ti.try_number,
            "map_index": ti.map_index,
        }
        path = receipts_path(str(target))
        try:
            append_line(receipt_line(made), path)
        except OSError:  # a receipt is a record, not the task's purpose
            self.log.exception("churn %s: could not write the receipt to %s", self._kind, path)
            return None
        return str(path)

    def _send_options(self) -> dict[str, Any]:
        """``send_options`` by the names and types of the send's declared keywords: an
        unknown name fails the task; a rendered template is text, read by the keyword's type
        (``"false"`` for a bool, JSON for a mapping; a str keyword keeps it as written)."""
        declared = {o.name: o for o in send_keywords(self._kind)}
        known = {*declared, "options"}
        if unknown := sorted(set(self.send_options) - known):
            raise AirflowFailException(
                f"churn {self._kind}: unknown send_options {unknown}; known: {sorted(known)}"
            )
        try:
            return {
                name: keyword_from_text(name, value, declared[name].hint, "send_options")
                if name in declared
                else value
                for name, value in self.send_options.items()
            }
        except ConfigurationError as exc:
            raise AirflowFailException(f"churn {self._kind}: {exc}") from None

    def _ledger_of_connection(self, *, dry_run: bool) -> Ledger:
        """The ledger that ``ledger_conn_id`` names, open (a refused password, a bad
        connection: the task fails without retrying; a server down: it retries)."""
        assert self.ledger_conn_id is not None
        try:
            return ledger_from_connection(self.ledger_conn_id, read_only=dry_run)
        except ChurnConnectorError as exc:
            if exc.retryable:
                raise
            raise AirflowFailException(f"churn {self._kind}: {exc}") from None

    def on_kill(self) -> None:
        """Stop a send in progress. Airflow 3 calls this from its SIGTERM handler in the main
        thread, and after an execution timeout, once execute has left (then it does nothing)."""
        if self._sending and threading.get_ident() == self._main_thread:
            self._sending = False
            self.log.warning("churn %s: stopping the send (the task was killed)", self._kind)
            raise ChurnSendKilled(f"churn {self._kind}: stopped by on_kill")

    def _input(self, context: Context) -> Any:
        if self.sql is not None and self.conn_id is not None:
            try:
                return query_of_connection(self.conn_id, self.sql).query
            except ConfigurationError as exc:
                raise AirflowFailException(f"churn {self._kind}: {exc}") from None
        if self._upstream is None:
            return os.fspath(self.source) if isinstance(self.source, os.PathLike) else self.source
        data = self._upstream.resolve(context)
        if data is None:
            raise AirflowFailException("source: the upstream task returned nothing")
        return data

    def _failure(self, recorded: Recorded) -> BaseException | None:
        """What the task raises, if it fails: retryable unless a retry cannot help."""
        files = f" (results: {recorded.files['rows']})" if recorded.files else ""
        error = recorded.error
        if error is not None:
            cause = error.__cause__
            if cause is not None and not isinstance(cause, Exception | ChurnSendKilled):
                return cause  # Airflow's own (AirflowTaskTimeout): its handling applies
            if not error.retryable:  # the key refused, a TLS setup, a broken file, ...
                return AirflowFailException(f"churn {self._kind}: {error}{files}")
            return _with_note(error, files)
        assert recorded.result is not None
        try:
            recorded.result.raise_for_failures(allow_invalid=not self.fail_on_invalid)
        except DeliveryError as exc:
            message = f"churn {self._kind}: rows not delivered: {exc}{files}"
            if exc.retryable:
                # rows failed (outcome unknown or never sent): a retry may deliver them, and
                # message ids make re-sending what did arrive harmless
                return DeliveryError(message, counts=exc.counts)
            return AirflowFailException(message)  # invalid or rejected: the data must change
        return None


def _with_note(error: RunStopped | Interrupted, note: str) -> RunStopped | Interrupted:
    if note:
        error.add_note(note.strip())
    return error


class SendEventsOperator(_ChurnSendOperator):
    """Validate events and send them (``POST /v1/events/batch``, up to 500 per request).

    ``send_options`` are :meth:`Client.send_events`'s keywords (templated): ``ledger``,
    ``namespace``, ``naive_timezone``, ``id_columns``, ``batch_size``, ``dry_run``, ...;
    ``client_options`` override the connection's extra (``max_concurrency``, ...).
    ``ledger_conn_id`` names an Airflow PostgreSQL connection that holds the ledger (its
    password stays in the connection), instead of ``send_options={"ledger": ...}``.
    ``plan``: a :class:`~churn_connector.TrackingPlan` (or its mapping), kept with the DAG as
    its mapping, or the path of its file (templated; read on the worker): rows that break it
    are invalid and never sent.
    Invalid rows are reported in the summary and the rows file; they fail the task only
    with ``fail_on_invalid=True``. Valid rows that were not delivered always fail it.
    """

    _kind = "events"
    _delivers = True


class IdentifyOperator(_ChurnSendOperator):
    """Validate identities and send one ``POST /v1/identify`` per user; ``send_options`` are
    :meth:`Client.identify`'s keywords (``duplicates``, ``phone_region``, ``ledger``, ...);
    otherwise as :class:`SendEventsOperator`."""

    _kind = "identities"
    _delivers = True
