"""Fault injection: scripted faults (a FIFO) first, then seeded random draws."""

from __future__ import annotations

import dataclasses
import math
import random
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal, get_args

FaultKind = Literal["5xx", "429", "drop", "stall"]
_KINDS: Final = get_args(FaultKind)
RANDOM_5XX: Final = (500, 502, 503)


def _check_retry_after(value: object, name: str) -> None:
    if isinstance(value, str):
        # sent verbatim as a header value: refuse anything that could split the header
        if not value or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise ValueError(f"{name} must be a non-empty header value without control chars")
        return
    if type(value) is bool or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds or a string")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0")


def format_retry_after(value: float | str) -> str:
    """The ``Retry-After`` header value: whole seconds as an integer, strings verbatim.

    Fractional seconds are sent as a decimal ("0.25"): not standard HTTP, but it keeps tests
    of back-off fast; pass a string for full control.
    """
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Fault:
    """One scripted fault, consumed by the next matching request.

    ``kind``: ``"5xx"`` answers ``status`` (500-599) without storing; ``"429"`` answers 429
    with ``Retry-After`` (``retry_after``, else the sandbox default) without storing;
    ``"drop"`` stores a valid body, then closes the connection without a response;
    ``"stall"`` sleeps ``seconds`` and then answers normally. ``endpoint`` (a path such as
    ``"/v1/identify"``) restricts which requests may consume the fault.
    """

    kind: FaultKind
    status: int = 503
    retry_after: float | str | None = None
    endpoint: str | None = None
    seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"Fault kind must be one of {_KINDS}, got {self.kind!r}")
        if self.kind == "5xx" and not (type(self.status) is int and 500 <= self.status <= 599):
            raise ValueError(f"a 5xx fault needs a status in 500..599, got {self.status!r}")
        if self.retry_after is not None:
            _check_retry_after(self.retry_after, "Fault.retry_after")
        if self.endpoint is not None and not self.endpoint.startswith("/"):
            raise ValueError("Fault.endpoint must be a path such as '/v1/events/batch'")
        if not (math.isfinite(self.seconds) and self.seconds >= 0):
            raise ValueError("Fault.seconds must be a finite number >= 0")


@dataclass(frozen=True)
class FaultKnobs:
    """The random fault settings; validated as a whole (the probabilities share one draw)."""

    latency: float = 0.0
    error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    retry_after: float | str = 1
    drop_rate: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise ValueError("latency must be a finite number of seconds >= 0")
        rates = {
            "error_rate": self.error_rate,
            "rate_limit_rate": self.rate_limit_rate,
            "drop_rate": self.drop_rate,
        }
        for name, rate in rates.items():
            if type(rate) is bool or not (0.0 <= rate <= 1.0):
                raise ValueError(f"{name} must be a probability in [0, 1], got {rate!r}")
        if sum(rates.values()) > 1.0 + 1e-9:
            raise ValueError("error_rate + rate_limit_rate + drop_rate must not exceed 1")
        _check_retry_after(self.retry_after, "retry_after")


class FaultPlan:
    """Decides the fault (if any) for each request; thread-safe.

    One ``random()`` draw per request that reaches the fault stage (plus one to pick the 5xx
    status), from ``random.Random(seed)``: the sequence is reproducible for a given request
    order. A scripted fault replaces the random draw for the request that consumes it.
    """

    def __init__(self, knobs: FaultKnobs, seed: int | None) -> None:
        self._knobs = knobs
        self._rng = random.Random(seed)
        self._queue: deque[Fault] = deque()
        self._lock = threading.Lock()

    @property
    def knobs(self) -> FaultKnobs:
        """The current random fault settings."""
        return self._knobs

    def update(self, **changes: float | str) -> None:
        """Replace some knobs; unknown names raise TypeError, bad values ValueError."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(FaultKnobs)}
        if unknown:
            raise TypeError(f"unknown fault setting(s): {', '.join(sorted(unknown))}")
        with self._lock:
            self._knobs = dataclasses.replace(self._knobs, **changes)  # type: ignore[arg-type]

    def script(self, faults: Iterable[Fault]) -> None:
        """Append faults to the FIFO."""
        items = list(faults)
        for item in items:
            if not isinstance(item, Fault):
                raise TypeError(f"expected Fault, got {type(item).__name__}")
        with self._lock:
            self._queue.extend(items)

    def pending(self) -> tuple[Fault, ...]:
        """Scripted faults not consumed yet, in order."""
        with self._lock:
            return tuple(self._queue)

    def next_fault(self, path: str) -> Fault | None:
        """The fault for one request to ``path``: the first matching scripted one, else a draw."""
        with self._lock:
            for i, fault in enumerate(self._queue):
                if fault.endpoint is None or fault.endpoint == path:
                    del self._queue[i]
                    return fault
            knobs = self._knobs
            draw = self._rng.random()
            if draw < knobs.drop_rate:
                return Fault("drop")
            draw -= knobs.drop_rate
            if draw < knobs.error_rate:
                return Fault("5xx", status=self._rng.choice(RANDOM_5XX))
            draw -= knobs.error_rate
            if draw < knobs.rate_limit_rate:
                return Fault("429")
            return None
