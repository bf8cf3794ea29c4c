"""Every ``ClientConfig`` field, and its effect on the sync path and the async path, over HTTP.

The fields come from the dataclass itself: a field added without a test here fails
``test_every_field_has_its_effect_shown_on_both_paths``. The sync path is ``cc.Client``
(``track()``, the thread tracker, a batch send where the field is about batches); the async
path is ``cc.AsyncClient`` (``await track()``, the async tracker). A field that means
nothing on one path is declared so in ``NOT_ON`` with the reason, and the reason is checked.
The peers are real: the sandbox and its fault knobs, a TLS server with a throw-away CA, a
CONNECT proxy, a closed port, a port whose connects hang.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pandas as pd
import pytest
import trustme

import churn_connector as cc
from tests.faultproxy import FaultProxy
from tests.netfixtures import ConnectProxy, https_server, unanswered_connects

pytestmark = pytest.mark.e2e  # real HTTP throughout

Path_ = Literal["sync", "async"]
PATHS: tuple[Path_, ...] = ("sync", "async")
KEY = "sk_test_CANARY_config_0123456789"

# a field that truly means nothing on one path, and why (checked below, never skipped)
NOT_ON: dict[tuple[str, Path_], str] = {
    ("identify_concurrency", "async"): "cc.AsyncClient sends events only (no identify)",
}
SHOWN: dict[str, tuple[Path_, ...]] = {}  # field -> the paths a test below shows it on


def shows(field: str, *paths: Path_) -> Callable[[Callable[..., None]], Any]:
    """Mark a test as showing ``field``'s effect, run once per path."""
    SHOWN[field] = paths or PATHS

    def mark(test: Callable[..., None]) -> Any:
        return pytest.mark.parametrize("path", SHOWN[field])(test)

    return mark


def test_every_field_has_its_effect_shown_on_both_paths() -> None:
    fields = [f.name for f in dataclasses.fields(cc.ClientConfig)]
    for name in fields:
        for path in PATHS:
            shown = path in SHOWN.get(name, ())
            declared = (name, path) in NOT_ON
            assert shown != declared, (
                f"ClientConfig.{name} on the {path} path: show its effect in a test here, or "
                "declare in NOT_ON why it means nothing there (not both)"
            )
    assert set(SHOWN) | {name for name, _ in NOT_ON} == set(fields)


def test_what_means_nothing_on_a_path_is_so() -> None:
    # identify_concurrency: there is nothing for it to bound on the async path
    assert not hasattr(cc.AsyncClient, "identify")
    assert hasattr(cc.Client, "identify")


# -- the two paths, the same calls ------------------------------------------------------------


@pytest.fixture
def real_waits() -> Iterator[None]:
    """Back-off and pauses as configured (the suite skips them): for effects in time."""
    cc.set_retry_testing(False)
    try:
        yield
    finally:
        cc.set_retry_testing(True)


def track(path: Path_, url: str, key: str = KEY, **options: Any) -> cc.TrackResult:
    """One ``track()`` of a fixed event, on ``path``."""
    if path == "sync":
        client = cc.Client(url, key, **options)
        try:
            return client.track("u1", "login", properties={"via": path})
        finally:
            client.close()

    async def run() -> cc.TrackResult:
        async with cc.AsyncClient(url, key, **options) as client:
            return await client.track("u1", "login", properties={"via": path})

    return asyncio.run(run())


def tracked(
    path: Path_, url: str, n: int, key: str = KEY, *, pad: int = 0, **options: Any
) -> tuple[cc.FlushReport, float]:
    """``n`` events through a tracker on ``path`` (its default concurrency), flushed and
    closed; the report, and the seconds from the first ``track`` to the end."""
    events = [{"i": i, "pad": "x" * pad} if pad else {"i": i} for i in range(n)]
    started = time.monotonic()
    if path == "sync":
        tracker = cc.Client(url, key, **options).tracker()
        for properties in events:
            tracker.track("u1", "page_view", properties=properties)
        return tracker.close(), time.monotonic() - started

    async def run() -> cc.FlushReport:
        async with cc.AsyncClient(url, key, **options) as client:
            tracker = client.tracker()
            for properties in events:
                await tracker.track("u1", "page_view", properties=properties)
            return await tracker.aclose()

    report = asyncio.run(run())
    return report, time.monotonic() - started


def busiest(times: pd.Series, window: float) -> int:
    """The most requests received within any ``window`` seconds."""
    seconds = sorted((times - times.min()).dt.total_seconds())
    best = lo = 0
    for hi, t in enumerate(seconds):
        while t - seconds[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def https_url(ca: trustme.CA) -> Iterator[str]:
    with https_server(ca) as port:
        yield f"https://localhost:{port}"


# -- where the API is, and who we are ----------------------------------------------------------


@shows("base_url")
def test_base_url(path: Path_) -> None:
    with cc.Sandbox(api_keys=[KEY]) as sandbox:
        assert track(path, sandbox.base_url).status == 200
        assert sandbox.events()["properties"].tolist() == [{"via": path}]
        with pytest.raises(cc.TransportError) as caught:  # a path the API does not serve
            track(path, sandbox.base_url + "/api")
    assert str(caught.value).startswith(
        "the API answered HTTP 404 for /v1/events/track: check base_url"
    )


@shows("api_key")
def test_api_key(path: Path_) -> None:
    other = "sk_test_CANARY_other_app_987654"
    with cc.Sandbox(api_keys=[KEY, other]) as sandbox:
        track(path, sandbox.base_url, other)
        assert (len(sandbox.events(KEY)), len(sandbox.events(other))) == (0, 1)
        with pytest.raises(cc.AuthenticationError) as caught:
            track(path, sandbox.base_url, "sk_test_CANARY_refused_55555")
    assert str(caught.value) == (
        "the API refused the key (HTTP 401); check CHURN_API_KEY. The run was stopped."
    )
    assert "CANARY" not in str(caught.value) + repr(caught.value)


@shows("auth_header")
def test_auth_header(path: Path_) -> None:
    with cc.Sandbox(api_keys=[KEY]) as sandbox:
        track(path, sandbox.base_url, auth_header="x-api-key")
        (headers,) = sandbox.requests_log()["headers"]
    assert "x-api-key" in headers and "authorization" not in headers


@shows("allow_insecure_http")
def test_allow_insecure_http(path: Path_) -> None:
    # a host name that is not loopback by its spelling: plain http:// needs the opt-in
    host = socket.gethostname()
    assert not cc.ClientConfig.create("http://localhost", KEY).base_url.endswith(host)
    with cc.Sandbox(api_keys=[KEY], host=socket.gethostbyname(host)) as sandbox:
        url = f"http://{host}:{sandbox.base_url.rsplit(':', 1)[1]}"
        with pytest.raises(cc.ConfigurationError, match="plain http:// is refused"):
            track(path, url)
        assert track(path, url, allow_insecure_http=True).status == 200
        assert len(sandbox.events()) == 1


# -- how long it waits -------------------------------------------------------------------------


@shows("connect_timeout")
def test_connect_timeout(path: Path_) -> None:
    once = cc.RetryPolicy(max_attempts=1)
    with unanswered_connects() as port:
        started = time.monotonic()
        with pytest.raises(cc.DeliveryError) as caught:
            track(path, f"http://127.0.0.1:{port}", connect_timeout=0.3, retry=once)
    assert time.monotonic() - started < 3
    assert "not acknowledged after 1 attempt(s): connect timeout" in str(caught.value)


@shows("read_timeout")
def test_read_timeout(path: Path_) -> None:
    once = cc.RetryPolicy(max_attempts=1)
    with cc.Sandbox(api_keys=[KEY], latency=2.0) as sandbox:
        started = time.monotonic()
        with pytest.raises(cc.DeliveryError) as caught:
            track(path, sandbox.base_url, read_timeout=0.3, retry=once)
        assert time.monotonic() - started < 1.8
    assert "not acknowledged after 1 attempt(s): read timeout" in str(caught.value)


@shows("request_timeout")
def test_request_timeout(path: Path_) -> None:
    # each read of the trickled answer comes well within read_timeout; the whole does not
    once = cc.RetryPolicy(max_attempts=1)
    with (
        cc.Sandbox(api_keys=[KEY]) as sandbox,
        FaultProxy(sandbox.base_url, mode="trickle", trickle_interval=0.2) as proxy,
    ):
        started = time.monotonic()
        with pytest.raises(cc.DeliveryError) as caught:
            track(path, proxy.url, request_timeout=0.5, read_timeout=5, retry=once)
        assert time.monotonic() - started < 2.5
    assert "no complete answer within request_timeout (0.5 s)" in str(caught.value)


@shows("deadline")
def test_deadline(path: Path_, real_waits: None) -> None:
    # every answer a 503 after 0.3 s: the call's deadline ends the retries, whatever the policy
    many = cc.RetryPolicy(max_attempts=100, initial_delay=0.1)
    with cc.Sandbox(api_keys=[KEY], error_rate=1.0, latency=0.3) as sandbox:
        started = time.monotonic()
        with pytest.raises(cc.DeliveryError) as caught:
            track(path, sandbox.base_url, deadline=1.0, retry=many)
        elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 2.5
    assert "deadline" in str(caught.value)


@shows("fail_fast_after")
def test_fail_fast_after(path: Path_, real_waits: None) -> None:
    # a tracker's run against a closed port stops once the host was unreachable that long,
    # not after a hundred attempts of back-off
    many = cc.RetryPolicy(max_attempts=100)
    port = closed_port()
    report, elapsed = tracked(path, f"http://127.0.0.1:{port}", 3, fail_fast_after=0.5, retry=many)
    assert elapsed < 3
    assert report.counts["failed"] == 3 and report.n_delivered == 0
    # the request that tripped the breaker says so; any other in flight was abandoned
    where = f"127.0.0.1:{port}"
    stopped = (
        f"cannot reach the API at {where}: connection refused by {where}. The run was stopped."
    )
    errors = [u.error for u in report.undelivered]
    assert stopped in errors
    assert all(
        e in (stopped, f"connection refused by {where}; outcome unknown, safe to re-send")
        for e in errors
    )


# -- how it retries ----------------------------------------------------------------------------


@shows("retry")
def test_retry(path: Path_, real_waits: None) -> None:
    three = cc.RetryPolicy(max_attempts=3, initial_delay=0.01)
    with cc.Sandbox(api_keys=[KEY], error_rate=1.0) as sandbox:
        with pytest.raises(cc.DeliveryError) as caught:
            track(path, sandbox.base_url, retry=three)
        assert len(sandbox.requests_log()) == 3
    assert "not acknowledged after 3 attempt(s): HTTP 50" in str(caught.value)
    # a Retry-After honoured up to max_retry_after, the pause shared by the client's requests
    capped = cc.RetryPolicy(max_retry_after=0.2)
    with cc.Sandbox(api_keys=[KEY]) as sandbox:
        sandbox.script_faults([cc.Fault("429", retry_after=30)])
        started = time.monotonic()
        result = track(path, sandbox.base_url, retry=capped)
        assert time.monotonic() - started < 2
    assert (result.status, result.attempts) == (200, 2)


@shows("max_requests_per_second")
def test_max_requests_per_second(path: Path_) -> None:
    # a tracker of single-event requests held to 5 requests a second, whatever its workers
    with cc.Sandbox(api_keys=[KEY]) as sandbox:
        report, elapsed = tracked(
            path, sandbox.base_url, 10, batch_size=1, max_requests_per_second=5
        )
        log = sandbox.requests_log()
    assert report.ok and len(log) == 10
    assert elapsed >= 9 / 5
    # one request of slack beyond the bucket's own: on a loaded machine the sandbox's
    # thread can note two requests that left 0.2 s apart within the same instant
    assert busiest(log["received_at"], 1.0) <= 5 + 2


@shows("budget")
def test_budget(path: Path_, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the tracker's slots come from the shared budget's row (one grant per request here)
    from churn_connector._delivery.budget import budget_of  # noqa: PLC0415
    from tests.ledger.servers import PG_PASSWORD  # noqa: PLC0415

    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    url = pg_url.replace(f":{PG_PASSWORD}@", "@")
    with cc.Sandbox(api_keys=[KEY]) as sandbox:
        config = cc.ClientConfig.create(
            sandbox.base_url, KEY, budget=url, max_requests_per_second=50
        )
        budget = budget_of(config)
        assert budget is not None
        before = budget.grants
        report, _ = tracked(
            path, sandbox.base_url, 4, batch_size=1, budget=url, max_requests_per_second=50
        )
    assert report.ok
    assert budget.grants >= before + 4


# -- how much at once --------------------------------------------------------------------------


@shows("max_concurrency")
def test_max_concurrency(path: Path_) -> None:
    # four single-event requests at 0.3 s each: one at a time, or together
    with cc.Sandbox(api_keys=[KEY], latency=0.3) as sandbox:
        serial, one = tracked(path, sandbox.base_url, 4, batch_size=1, max_concurrency=1)
        wide, four = tracked(path, sandbox.base_url, 4, batch_size=1, max_concurrency=4)
    assert serial.ok and wide.ok
    assert one >= 4 * 0.3 > four


@shows("identify_concurrency", "sync")
def test_identify_concurrency(path: Path_) -> None:
    users = pd.DataFrame({"external_user_id": [f"u{i}" for i in range(4)]})
    with cc.Sandbox(api_keys=[KEY], latency=0.3) as sandbox:
        started = time.monotonic()
        assert cc.Client(sandbox.base_url, KEY, identify_concurrency=1).identify(users).ok
        one = time.monotonic() - started
        started = time.monotonic()
        assert cc.Client(sandbox.base_url, KEY, identify_concurrency=4).identify(users).ok
        four = time.monotonic() - started
    assert one >= 4 * 0.3 > four


@shows("batch_size")
def test_batch_size(path: Path_, now: pd.Timestamp) -> None:
    with cc.Sandbox(api_keys=[KEY], latency=0.2) as sandbox:
        if path == "sync":  # a batch send, as much as a tracker
            table = pd.DataFrame(
                {
                    "external_user_id": ["u1"] * 5,
                    "event_type": ["login"] * 5,
                    "occurred_at": [now - pd.Timedelta(minutes=i) for i in range(5)],
                }
            )
            chunks = cc.Client(sandbox.base_url, KEY, batch_size=2).send_events(table, now=now)
            assert chunks.chunks["events"].tolist() == [2, 2, 1]
        # one worker: the first request leaves at once, the rest queue behind it in twos
        report, _ = tracked(path, sandbox.base_url, 7, batch_size=2, max_concurrency=1)
        stats = sandbox.stats()
    assert report.ok and report.n_delivered == 7
    assert stats["requests"]["POST /v1/events/batch 200"] == 4 + (3 if path == "sync" else 0)


@shows("max_request_bytes")
def test_max_request_bytes(path: Path_) -> None:
    with cc.Sandbox(api_keys=[KEY], latency=0.2) as sandbox:
        report, _ = tracked(
            path, sandbox.base_url, 20, pad=200, max_request_bytes=1000, max_concurrency=1
        )
        log = sandbox.requests_log()
    assert report.ok and report.n_delivered == 20
    assert len(log) > 5 and (log["body_len"] <= 1000).all()


# -- a batch the API refuses -------------------------------------------------------------------


def refused_one_of(path: Path_, **options: Any) -> cc.FlushReport:
    """A first event in flight on a slow API, then four behind it, sent as one request of
    four (one worker). The API's clock runs two minutes late, so the third of them, four
    minutes ahead of ours, is past its five-minute tolerance: the API refuses the request
    it is in."""
    now = pd.Timestamp.now(tz="UTC")
    late = now.to_pydatetime() - pd.Timedelta(minutes=2)
    ahead = (now + pd.Timedelta(minutes=4)).isoformat()
    behind = [None, None, ahead, None]
    with cc.Sandbox(api_keys=[KEY], latency=0.3, clock=lambda: late) as sandbox:
        if path == "sync":
            tracker = cc.Client(sandbox.base_url, KEY, max_concurrency=1, **options).tracker()
            tracker.track("u1", "page_view", properties={"i": 0})
            while tracker._book.waiting:  # taken by the worker: in flight
                time.sleep(0.01)
            for i, when in enumerate(behind, 1):
                tracker.track("u1", "page_view", occurred_at=when, properties={"i": i})
            return tracker.close()

        async def run() -> cc.FlushReport:
            client = cc.AsyncClient(sandbox.base_url, KEY, max_concurrency=1, **options)
            async with client:
                tracker = client.tracker()
                await tracker.track("u1", "page_view", properties={"i": 0})
                while tracker._book.waiting:
                    await asyncio.sleep(0.01)
                for i, when in enumerate(behind, 1):
                    await tracker.track("u1", "page_view", occurred_at=when, properties={"i": i})
                return await tracker.aclose()

        return asyncio.run(run())


@shows("bisect_rejected")
def test_bisect_rejected(path: Path_) -> None:
    split = refused_one_of(path)
    whole = refused_one_of(path, bisect_rejected=False)
    assert (split.counts["rejected"], split.n_delivered) == (1, 4)
    assert (whole.counts["rejected"], whole.n_delivered) == (4, 1)


@shows("max_split_requests")
def test_max_split_requests(path: Path_) -> None:
    spent = refused_one_of(path, max_split_requests=0)  # no extra request to spend
    assert (spent.counts["rejected"], spent.n_delivered) == (4, 1)


# -- how it connects ---------------------------------------------------------------------------


@shows("ca_bundle")
def test_ca_bundle(path: Path_, https_url: str, ca_file: str) -> None:
    assert track(path, https_url, ca_bundle=ca_file).status == 200
    with pytest.raises(cc.TransportError, match=r"TLS certificate of localhost:\d+ not trusted"):
        track(path, https_url)


@shows("ca_store")
def test_ca_store(
    path: Path_, https_url: str, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    # the trust order's last step: the system's store (truststore) lacks the throw-away CA...
    with pytest.raises(cc.TransportError, match=r"TLS certificate of localhost:\d+ not trusted"):
        track(path, https_url, ca_store="system")
    # ...which a variable above the store names
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    assert track(path, https_url, ca_store="system").status == 200


@shows("verify")
def test_verify(path: Path_, https_url: str) -> None:
    # off only for loopback (a local TLS test server): the untrusted certificate is accepted
    assert track(path, https_url, verify=False).status == 200
    with pytest.raises(cc.ConfigurationError, match="verify=False is refused"):
        track(path, "https://api.example.com", verify=False)


@shows("proxy")
def test_proxy(path: Path_, https_url: str, ca_file: str) -> None:
    with ConnectProxy() as proxy:
        result = track(path, https_url, ca_bundle=ca_file, proxy=proxy.url)
    assert result.status == 200
    (connect,) = proxy.requests
    assert connect.startswith(f"CONNECT localhost:{https_url.rsplit(':', 1)[1]} HTTP/".encode())
    assert KEY.encode() not in proxy.received  # TLS from us to the API, end to end
    with pytest.raises(cc.ConfigurationError, match="only used for an https:// base URL"):
        track(path, "http://127.0.0.1:1", proxy="http://127.0.0.1:2")


@shows("trust_env")
def test_trust_env(
    path: Path_, https_url: str, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        track(path, https_url, ca_bundle=ca_file)  # the environment is not read by default
        assert proxy.requests == []
        track(path, https_url, ca_bundle=ca_file, trust_env=True)
        assert len(proxy.requests) == 1
