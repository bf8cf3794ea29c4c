"""The options of a Spark send, read and checked once on the driver, carried to every task.

Spark hands a data source its options as text (``.option("max_concurrency", 4)`` arrives as
``"4"``); the Python helpers pass typed values. Both are read by the same names as the
Python API (``max_concurrency``, ``namespace``, ``duplicates``, ...), checked on the driver
(so a typo fails the job before a task starts), and carried to the tasks in one picklable
:class:`SparkSettings`, whose repr never shows the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._client import Client, send_keywords
from .._core import (
    CLIENT_FIELDS,
    KINDS,
    RETRY_FIELDS,
    ClientConfig,
    ConfigurationError,
    Kind,
    PlanError,
    Secret,
    client_options_from,
    from_text,
)
from .._delivery import SendOptions
from .._ledger import without_password
from .._options import EventOptions, IdentityOptions
from .._read import DEFAULT_SLICE_ROWS
from .._validate import TrackingPlan, as_plan

NAME = "churn"  # df.write.format("churn")
"""The data source's short name: ``df.write.format("churn")``."""
SECRET_OPTION = "api_token"  # noqa: S105 - an option's name, not a secret
KEY_ENV = "CHURN_API_KEY"
# the whole job's request rate when nobody says otherwise: about what one machine sends with
# the default concurrency (8) at a 40 ms round trip, however many cores the cluster has
DEFAULT_REQUESTS_PER_SECOND = 200.0
"""The whole job's request budget when ``max_requests_per_second`` is not given."""
# how many tasks a share of the budget assumes run at once when nobody says (the data source
# written by hand: no code on the driver's side of it can ask Spark): 16 keeps the job within
# its budget on a cluster of up to 16 task slots, and a task still sends 12.5 requests/s
# (6,250 events/s at 500 a request) of the default 200; saying `parallelism` raises it
ASSUMED_PARALLELISM = 16
"""The tasks assumed to run at once when ``parallelism`` is not given."""
# the column partition_by_user adds: each row's place before the shuffle (tasks drop it)
ORDER_COLUMN = "__churn_order"

# the send options of the Python API that mean something for a Spark partition, by name and
# type hint, from their declarations (``spark=False``: dtypes, encoding and the text options
# are for files, as a Spark column carries its type; progress is off); batch_size and
# max_concurrency are read as the client's
SEND_OPTIONS: dict[Kind, dict[str, Any]] = {
    kind: {
        o.name: o.hint
        for o in send_keywords(kind)
        if o.declared.spark and o.name not in CLIENT_FIELDS
    }
    for kind in KINDS
}
# options of this integration (path: Spark adds it for save("..."), checkpointlocation for a
# stream's option("checkpointLocation", ...): both Spark's own, which mean nothing here)
OWN_OPTIONS = {
    "kind": str,
    "base_url": str | None,
    SECRET_OPTION: str | None,
    "fail_on_invalid": bool,
    "max_requests_per_second": float | None,
    "parallelism": int | None,
    "partitioned_by_user": bool,
    "summary_path": str | None,
    "path": str | None,
    "checkpointlocation": str | None,
}
_RATE = "max_requests_per_second"
# names someone might give the key: their values would show in plans and the Spark UI
_KEY_LIKE = {"api_key", "apikey", "api-key", "key", "churn_api_key"}


@dataclass(frozen=True)
class SparkSettings:
    """Everything a task needs to send its partition; checked on the driver, picklable."""

    kind: Kind
    base_url: str | None  # None: CHURN_BASE_URL in the executors' environment
    api_token: Secret | None = field(repr=False)  # None: CHURN_API_KEY on the executors
    client_options: dict[str, Any] = field(default_factory=dict)
    send_options: dict[str, Any] = field(default_factory=dict)
    fail_on_invalid: bool = False
    max_requests_per_second: float | None = DEFAULT_REQUESTS_PER_SECOND
    parallelism: int | None = None
    partitioned_by_user: bool = False
    summary_path: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SparkSettings:
        """Read and check options (text or typed) by the names of the Python API."""
        given = {str(k).lower(): v for k, v in options.items()}
        # None leaves an option at its default, but turns the request budget off
        given = {k: v for k, v in given.items() if v is not None or k == _RATE}
        if _RATE in given and str(given[_RATE]).strip().lower() in ("off", "none", "null"):
            given[_RATE] = None
        refuse_key_options(given)
        kind = given.pop("kind", "events")
        if kind not in KINDS:
            raise ConfigurationError(f"option kind must be one of {KINDS}, not {kind!r}")
        sends = SEND_OPTIONS[kind]
        known = set(OWN_OPTIONS) | CLIENT_FIELDS | RETRY_FIELDS | set(sends)
        unknown = sorted(set(given) - known)
        if unknown:
            raise ConfigurationError(
                f"unknown option(s) {unknown} for kind={kind}; known: {sorted(known)}"
            )
        own = {
            k: from_text(k, given.pop(k), OWN_OPTIONS[k], "option")
            for k in set(given) & set(OWN_OPTIONS)
        }
        rate = own.get(_RATE, DEFAULT_REQUESTS_PER_SECOND)
        token = own.get(SECRET_OPTION)
        settings = cls(
            kind=kind,
            base_url=own.get("base_url"),
            api_token=None if token is None else Secret(token),
            client_options=client_options_from(
                {k: v for k, v in given.items() if k in CLIENT_FIELDS | RETRY_FIELDS}, "option"
            ),
            send_options={
                k: plan_option(v) if k == "plan" else from_text(k, v, sends[k], "option")
                for k, v in given.items()
                if k in sends
            },
            fail_on_invalid=bool(own.get("fail_on_invalid", False)),
            max_requests_per_second=rate,
            parallelism=own.get("parallelism"),
            partitioned_by_user=bool(own.get("partitioned_by_user", False)),
            summary_path=own.get("summary_path"),
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Everything that can be checked before a task starts (on the driver)."""
        rate = self.max_requests_per_second
        if rate is not None and not (isinstance(rate, int | float) and rate > 0):
            raise ConfigurationError(
                f"option max_requests_per_second must be a positive number or 'off', not {rate!r}"
            )
        if self.parallelism is not None and self.parallelism < 1:
            raise ConfigurationError("option parallelism must be at least 1")
        if self.api_token is not None and (problem := self.api_token.problem()) is not None:
            raise ConfigurationError(f"option {SECRET_OPTION}: {problem}")
        refuse_ledger_password(self.send_options)
        # the client options as a task will use them (the key and, where the executors'
        # environment holds it, the URL are only known there); a CA bundle's path (and
        # truststore) is one on the executors, maybe not on this machine, and without the
        # URL, whether its host is loopback (verify, plain http) is for the executors to judge
        unknowable = {"ca_bundle", "ca_store"} | ({"verify"} if self.base_url is None else set())
        options = {k: v for k, v in self.client_options.items() if k not in unknowable}
        if self.base_url is None:
            options["allow_insecure_http"] = True
        ClientConfig.create(
            self.base_url or "https://churn-base-url.invalid",
            Secret("placeholder"),
            **options,
            max_requests_per_second=self.task_rate(),
        )
        table = EventOptions if self.kind == "events" else IdentityOptions
        table.given(self.send_options)  # checked as a task will check them
        SendOptions.given(self.send_options)

    def task_rate(self) -> float | None:
        """One task's share of the job's request budget (None: no budget): split across
        ``parallelism`` tasks, or :data:`ASSUMED_PARALLELISM` when it is not known."""
        if self.max_requests_per_second is None:
            return None
        return self.max_requests_per_second / (self.parallelism or ASSUMED_PARALLELISM)

    def budget(self) -> dict[str, Any]:
        """The request budget in force, for the job's summary."""
        return {
            "max_requests_per_second": self.max_requests_per_second,
            "parallelism": self.parallelism,
            "assumed_parallelism": None if self.parallelism else ASSUMED_PARALLELISM,
            "per_task": self.task_rate(),
        }

    def client(self) -> Client:
        """The task's client: the key and, unless given, the URL from the executor's
        environment (CHURN_API_KEY, CHURN_BASE_URL)."""
        return Client(
            self.base_url,
            self.api_token,  # None: Client reads CHURN_API_KEY here, on the executor
            **self.client_options,
            max_requests_per_second=self.task_rate(),
        )

    @property
    def slice_rows(self) -> int:
        return int(self.send_options.get("slice_rows", DEFAULT_SLICE_ROWS))

    def send_keywords(self) -> dict[str, Any]:
        """The keywords of Client.send_events / Client.identify for one partition."""
        return {**self.send_options, "progress": False}


def plan_option(value: Any) -> TrackingPlan | None:
    """The ``plan`` option, loaded on the driver: a plan, its mapping, the JSON text of one
    (what :func:`save` writes), or the path of its file, read here. The tasks get the loaded
    plan, which pickles as its mapping: no executor needs to see the file."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            found = json.loads(value)
        except ValueError as exc:
            raise PlanError(f"option plan: not the JSON of a tracking plan ({exc})") from None
        return TrackingPlan.from_dict(found)
    return as_plan(value)


def plan_text(value: Any) -> str:
    """A ``plan`` as a Spark option carries it: the loaded plan's mapping as JSON (a path is
    read here, on the driver's side, rather than where the job runs)."""
    plan = as_plan(value)
    assert plan is not None
    return json.dumps(plan.to_dict())


def refuse_key_options(given: Mapping[str, Any]) -> None:
    """An option that looks like the key, under a name Spark does not redact, is refused
    (naming it, never echoing its value)."""
    for name in given:
        if name in _KEY_LIKE:
            raise ConfigurationError(
                f"option {name!r} is refused: use option {SECRET_OPTION!r} (or {KEY_ENV} in "
                "the executors' environment). Spark hides an option's value in plans, logs "
                "and its UI only when the option's name matches spark.redaction.regex "
                "(secret|password|token|access key|credential), and "
                f"{name!r} does not"
            )


def refuse_ledger_password(send_options: Mapping[str, Any]) -> None:
    """A password in the ``ledger`` option's URL would show where the option's value shows
    (plans, the UI, the event log): refused, naming where the executors can read it."""
    ledger = send_options.get("ledger")
    if not isinstance(ledger, str):
        return
    try:
        without_password(
            ledger,
            "would show in Spark's plans, UI and event log (Spark hides an option's value "
            "only when the option's name matches spark.redaction.regex)",
            "set PGPASSWORD in the executors' environment (spark.executorEnv.PGPASSWORD, "
            "which Spark redacts) or give them a ~/.pgpass",
        )
    except ValueError as exc:
        raise ConfigurationError(f"option ledger: {exc}") from None


def refuse_token_on_connect(df: Any, options: Mapping[str, Any]) -> None:
    """On Spark Connect the client sends the query plan, options and their values included,
    to the server, which shows it in its UI and writes it to its event log: only
    ``spark.redaction.string.regex`` (matched against the text, not the option's name)
    would hide the key there. So the helpers take no key as an option on Connect."""
    connect = type(df).__module__.startswith("pyspark.sql.connect")
    if connect and any(str(name).lower() == SECRET_OPTION for name in options):
        raise ConfigurationError(
            f"option {SECRET_OPTION!r} is refused on Spark Connect: the plan, with every "
            "option's value, is shown in the server's UI and written to its event log. Set "
            f"{KEY_ENV} in the executors' environment instead (from the cluster's secret "
            "store), or, writing the data source by hand, have the server redact it "
            "(spark.redaction.string.regex matching the key)"
        )
