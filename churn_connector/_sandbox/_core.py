"""The public :class:`Sandbox`: lifecycle, fault controls and DataFrame accessors."""

from __future__ import annotations

import os
import secrets
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import pandas as pd

from ._engine import DEFAULT_MAX_BODY_BYTES, Engine
from ._faults import Fault, FaultKnobs, FaultPlan
from ._server import SandboxHTTPServer
from ._store import Store, app_id

_STOP_JOIN_SECONDS = 2.0


def generate_test_key() -> str:
    """A random sandbox key, ``sk_test_`` + 24 hex digits."""
    return "sk_test_" + secrets.token_hex(12)


def _check_keys(api_keys: Sequence[str] | None) -> tuple[str, ...]:
    if api_keys is None:
        return (generate_test_key(),)
    if isinstance(api_keys, str):
        raise TypeError("api_keys must be a sequence of keys, not one string")
    keys = tuple(api_keys)
    if not keys:
        raise ValueError("api_keys must contain at least one key")
    for key in keys:
        # a key must be non-empty and survive a round trip through an HTTP header unchanged
        if (
            type(key) is not str
            or not key
            or not key.isascii()
            or not key.isprintable()
            or " " in key
        ):
            raise ValueError(
                "each API key must be a non-empty printable ASCII string without spaces"
            )
    if len(set(keys)) != len(keys):
        raise ValueError("api_keys contains the same key twice")
    return keys


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Sandbox:
    """A strict local stand-in for the ingestion API, served over real HTTP.

    Each API key is its own application: deduplication, storage and users never cross keys.
    Data stays readable after :meth:`stop` (until :meth:`close`), and a ``db`` file persists
    across instances. Use as a context manager::

        with Sandbox() as sb:
            send(base_url=sb.base_url, api_key=sb.api_key)
            sb.events()
    """

    def __init__(
        self,
        *,
        api_keys: Sequence[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        db: str | os.PathLike[str] | None = None,
        latency: float = 0.0,
        error_rate: float = 0.0,
        rate_limit_rate: float = 0.0,
        retry_after: float | str = 1,
        drop_rate: float = 0.0,
        seed: int | None = 0,
        clock: Callable[[], datetime] | None = None,
        max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        if max_body_bytes is not None and (type(max_body_bytes) is not int or max_body_bytes < 1):
            raise ValueError("max_body_bytes must be a positive int or None")
        self.api_keys: tuple[str, ...] = _check_keys(api_keys)
        self.api_key: str = self.api_keys[0]
        self._host = host
        self._port = port
        self._plan = FaultPlan(
            FaultKnobs(latency, error_rate, rate_limit_rate, retry_after, drop_rate), seed
        )
        self._store = Store(db)
        # closes the database if the sandbox is garbage-collected without close()
        self._finalizer = weakref.finalize(self, self._store.close)
        self._stopping = threading.Event()
        self._engine = Engine(
            apps={key: app_id(key) for key in self.api_keys},
            store=self._store,
            plan=self._plan,
            clock=clock or _utc_now,
            stopping=self._stopping,
            max_body_bytes=max_body_bytes,
        )
        self._server: SandboxHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._base_url: str | None = None
        self._lifecycle = threading.Lock()

    # ----------------------------------------------------------------------- lifecycle

    def start(self) -> Sandbox:
        """Bind and serve in a background thread; returns self. Restartable after stop()."""
        with self._lifecycle:
            if not self._finalizer.alive:
                raise RuntimeError("this sandbox is closed")
            if self._server is not None:
                raise RuntimeError("the sandbox is already running")
            self._stopping.clear()
            server = SandboxHTTPServer((self._host, self._port), self._engine)
            host, port = str(server.server_address[0]), int(server.server_address[1])
            shown = f"[{host}]" if ":" in host else host
            self._base_url = f"http://{shown}:{port}"
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.02},  # shutdown() waits up to one poll interval
                name=f"churn-sandbox-{port}",
                daemon=True,
            )
            thread.start()
            self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving: close open connections and join threads. Idempotent."""
        with self._lifecycle:
            server, thread = self._server, self._thread
            self._server = self._thread = None
            if server is None or thread is None:
                return
            self._stopping.set()  # wakes requests sleeping in latency or a stall
            server.shutdown()
            server.close_connections()
            server.server_close()
            thread.join(_STOP_JOIN_SECONDS)
            server.join_handlers(_STOP_JOIN_SECONDS)

    def close(self) -> None:
        """Stop and release the database (an in-memory one is gone afterwards)."""
        self.stop()
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:  # never shows a key
        state = "running" if self._server is not None else "stopped"
        return f"<Sandbox {self._base_url or 'not started'} {state}, {len(self.api_keys)} key(s)>"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the last one, after stop())."""
        if self._base_url is None:
            raise RuntimeError("the sandbox has not been started")
        return self._base_url

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._server is not None

    # ----------------------------------------------------------------------- faults

    def script_faults(self, faults: Iterable[Fault]) -> None:
        """Queue faults for the next requests (FIFO, one per request, before random ones)."""
        self._plan.script(faults)

    def pending_faults(self) -> tuple[Fault, ...]:
        """Scripted faults not consumed yet."""
        return self._plan.pending()

    def set_faults(self, **knobs: float | str) -> None:
        """Change latency, error_rate, rate_limit_rate, retry_after or drop_rate at runtime."""
        self._plan.update(**knobs)

    # ----------------------------------------------------------------------- inspection

    def _app(self, api_key: str | None) -> str:
        key = self.api_key if api_key is None else api_key
        if key not in self.api_keys:
            raise ValueError("not one of this sandbox's API keys")
        return app_id(key)

    def events(self, api_key: str | None = None) -> pd.DataFrame:
        """Stored events of one key (default: the first), in arrival order."""
        columns = [
            "external_user_id",
            "event_type",
            "occurred_at",
            "properties",
            "context",
            "message_id",
            "received_at",
        ]
        frame = pd.DataFrame(self._store.events(self._app(api_key)), columns=columns)
        frame["received_at"] = _utc(frame["received_at"])
        return frame

    def users(self, api_key: str | None = None) -> pd.DataFrame:
        """Identified users: traits, preferred_channel and the merged channel items."""
        columns = ["external_user_id", "traits", "preferred_channel", "channels"]
        return pd.DataFrame(self._store.users(self._app(api_key)), columns=columns)

    def identify_log(self, api_key: str | None = None) -> pd.DataFrame:
        """One row per accepted identify, in arrival order (wall-clock start/finish times)."""
        columns = ["seq", "external_user_id", "body", "started_at", "finished_at"]
        frame = pd.DataFrame(self._store.identify_log(self._app(api_key)), columns=columns)
        for column in ("started_at", "finished_at"):
            frame[column] = _utc(frame[column])
        return frame

    def requests_log(self) -> pd.DataFrame:
        """Every request (all keys): seq, method, path, status (<NA> when dropped), fault,
        headers (names lower-cased, credentials ``<redacted>``), body_len, body_sha256,
        received_at."""
        columns = [
            "seq",
            "method",
            "path",
            "status",
            "fault",
            "headers",
            "body_len",
            "body_sha256",
            "received_at",
        ]
        frame = pd.DataFrame(self._store.requests(), columns=columns)
        frame["status"] = frame["status"].astype("Int64")
        frame["received_at"] = _utc(frame["received_at"])
        return frame

    def stats(self, api_key: str | None = None) -> dict[str, Any]:
        """Counters of one key.

        ``requests``: ``{"POST /v1/events/batch 200": n, ...}`` (status ``dropped`` when the
        connection was closed without a response); ``stored``: events stored;
        ``duplicates``: identical re-sends of a stored message id; ``conflicts``: a stored
        message id re-sent with other content (disjoint from duplicates); ``identifies``:
        accepted identify calls; ``users``; ``max_concurrent_identify_same_user``; and
        ``rejected``: 400/411/413/415 answers.
        """
        return self._store.stats(self._app(api_key))


def _utc(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values, utc=True, format="ISO8601")
