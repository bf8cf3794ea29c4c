"""The network seam: a Poster posts bytes to a path and says how it ended.

``HttpPoster`` is the real one, a thin shell around the delivery ``policy``: it makes each
attempt the policy asks for on its pool (``connections``: urllib3 with deadlines that hold
even against a server that trickles its answer; or the caller's ``requests.Session``) and
waits where the policy says wait, on an Event that a stop sets. Retries, the shared 429
pause, the request budget, the breaker and the deadlines are the policy's, decided as for
the async poster. ``DryRunPoster`` sends nothing; tests may script their own. Every attempt
of one request sends the same bytes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from ..__version__ import __version__
from .._core import ClientConfig, SecretHeaders
from .answers import Outcome
from .connections import ConnectionPool
from .failures import NetworkFailure
from .policy import Attempt, DeadlineScope, Done, Policy, Wait
from .pool import Abort, Pool
from .retry import RetrySink

if TYPE_CHECKING:
    import requests


class Poster(Protocol):
    """One method is the network: post ``body`` to ``path``, return how it ended.

    May raise ``TransportError`` (or ``AuthenticationError``) to stop the whole run.
    """

    def post(self, path: str, body: bytes) -> Outcome: ...

    def stop(self, reason: str) -> None:
        """Make no new attempts and abandon those in flight: the run is ending."""
        ...

    def close(self) -> None: ...


class DryRunPoster:
    """Sends nothing: every request is built and recorded as ``dry_run``."""

    def post(self, path: str, body: bytes) -> Outcome:
        return Outcome("dry_run", None, 0, 0.0, None, None)

    def stop(self, reason: str) -> None:
        pass

    def close(self) -> None:
        pass


def request_headers(config: ClientConfig) -> SecretHeaders:
    """The headers of every request to the API, the key's among them (never shown)."""
    return SecretHeaders(
        {
            "Content-Type": "application/json",
            "Accept": "application/json",
            # an undecodable compressed 2xx body must not hide that the data was stored
            "Accept-Encoding": "identity",
            "User-Agent": f"churn-connector/{__version__}",
            **config.api_key.auth_headers(config.auth_header),
        }
    )


class HttpPoster:
    """Posts JSON bytes to the API as the delivery ``Policy`` decides, one attempt at a time,
    over the package's connections or the caller's ``requests.Session`` (see
    ``_delivery.session``). Its waits end at once when the run stops (``stop``), which also
    ends the attempts in flight.

    ``deadline``: ``"run"`` (a batch send: the run's deadline) or ``"call"`` (``track()``
    and a tracker's requests: each request has the whole ``deadline``).
    """

    def __init__(
        self,
        config: ClientConfig,
        pool_size: int,
        seed: int | None = None,
        session: requests.Session | None = None,
        on_retry: RetrySink | None = None,
        *,
        deadline: DeadlineScope = "run",
    ) -> None:
        self.config = config
        self.pool: Pool
        if session is None:
            self.pool = ConnectionPool(config, pool_size)
        else:
            # lazy: requests is only needed on this path, not to import the package
            from .session import SessionPool  # noqa: PLC0415

            self.pool = SessionPool(config, pool_size, session)
        self.headers = request_headers(config)
        self.policy = Policy(config, deadline=deadline, seed=seed, on_retry=on_retry)
        self._stop = threading.Event()

    def stop(self, reason: str) -> None:
        self.policy.stop(reason)
        self._stop.set()
        self.pool.abort_all(reason)

    def close(self) -> None:
        self.policy.retries.flush()
        self.pool.close()

    def post(self, path: str, body: bytes) -> Outcome:
        """POST ``body`` until the policy is done with it; raise what stops the run
        (``AuthenticationError`` on 401/403, ``TransportError`` when the host cannot be
        used)."""
        delivery = self.policy.delivery(path)
        step = delivery.next()
        while True:
            if isinstance(step, Attempt):
                try:
                    answer = self.pool.post(
                        path, body, self.headers, Abort(step.timeout, step.reason)
                    )
                except NetworkFailure as exc:
                    step = delivery.failed(exc)
                else:
                    step = delivery.answered(answer)
            elif isinstance(step, Wait):
                self._stop.wait(step.seconds)
                step = delivery.next()
            elif isinstance(step, Done):
                return step.outcome
            else:
                self.stop(step.reason)
                raise step.error
