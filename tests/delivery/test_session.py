"""A caller's own requests.Session as the way to the API: delivery, its headers and auth, mTLS,
retries and redirects judged as on the hot path, the key kept home, and the combinations that
are refused. Real HTTP on 127.0.0.1 only; requests is not mocked."""

from __future__ import annotations

import logging
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pytest
import requests
import trustme

import churn_connector as cc
from tests.netfixtures import https_server

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


KEY = "sk_test_CANARY_session_0123456789"


class HeaderAuth(requests.auth.AuthBase):
    """A custom auth class, as a corporate gateway would want: one header of its own."""

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["X-Corp-Auth"] = "granted"
        return r


class MutualTLS(NamedTuple):
    url: str
    clients: list[str]  # the common name of each request's client certificate


@pytest.fixture
def client_cert(ca: trustme.CA, tmp_path: Path) -> str:
    """One PEM file with the client's key and certificate (what ``session.cert`` takes)."""
    path = tmp_path / "client.pem"
    ca.issue_cert(
        "churn-client", common_name="churn-client"
    ).private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def mtls(ca: trustme.CA) -> Iterator[MutualTLS]:
    """HTTPS on 127.0.0.1 that requires a client certificate signed by ``ca``."""
    clients: list[str] = []
    with https_server(ca, clients=clients) as port:
        yield MutualTLS(f"https://localhost:{port}", clients)


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


@pytest.fixture
def keyed_sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[KEY]) as sb:
        yield sb


def batch_statuses(sandbox: cc.Sandbox) -> dict[str, int]:
    return {k: v for k, v in sandbox.stats()["requests"].items() if "/v1/events/batch" in k}


# -- delivery --------------------------------------------------------------------------------
def test_a_send_through_a_session_delivers_every_event_once(
    sandbox: cc.Sandbox, session: requests.Session, make_events: Callable[..., pd.DataFrame]
) -> None:
    now = pd.Timestamp.now(tz="UTC").floor("s")
    events = make_events(now, n=1200, users=40)
    client = cc.Client(sandbox.base_url, sandbox.api_key, session=session, read_timeout=5.0)
    result = client.send_events(events, now=now, batch_size=100)
    assert result.ok
    stats = sandbox.stats()
    assert stats["stored"] == 1200
    assert stats["duplicates"] == 0
    assert batch_statuses(sandbox) == {"POST /v1/events/batch 200": 12}


def test_the_one_call_form_takes_a_session(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    result = cc.send_events(events, sandbox.base_url, sandbox.api_key, session=session, now=now)
    assert result.ok
    assert sandbox.stats()["stored"] == len(events)


def test_the_sessions_own_headers_and_auth_are_applied(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    session.headers["X-Corp-Trace"] = "trace-1"
    session.auth = HeaderAuth()
    result = cc.Client(sandbox.base_url, sandbox.api_key, session=session).send_events(
        events, now=now
    )
    assert result.ok  # the key went too
    headers = sandbox.requests_log()["headers"].iloc[0]
    assert headers["x-corp-auth"] == "granted"
    assert headers["x-corp-trace"] == "trace-1"
    assert headers["authorization"] == "<redacted>"


def test_the_users_session_is_left_unchanged(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    before = (dict(session.headers), session.auth, dict(session.adapters), session.cookies.keys())
    cc.Client(sandbox.base_url, sandbox.api_key, session=session).send_events(events, now=now)
    after = (dict(session.headers), session.auth, dict(session.adapters), session.cookies.keys())
    assert after == before


def test_an_auth_that_overwrites_the_keys_header_is_refused(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    session.auth = ("proxy-user", "secret")  # Basic: it writes Authorization
    client = cc.Client(sandbox.base_url, sandbox.api_key, session=session)
    with pytest.raises(cc.ConfigurationError, match="auth_header='x-api-key'"):
        client.send_events(events, now=now)
    assert sandbox.stats()["stored"] == 0


# -- mutual TLS ------------------------------------------------------------------------------
def test_mtls_the_sessions_client_certificate_is_presented(
    mtls: MutualTLS,
    session: requests.Session,
    ca_file: str,
    client_cert: str,
    events: pd.DataFrame,
    now: pd.Timestamp,
) -> None:
    session.verify = ca_file
    session.cert = client_cert
    result = cc.Client(mtls.url, KEY, session=session).send_events(events, now=now)
    assert result.ok
    assert mtls.clients == ["churn-client"]


def test_mtls_without_a_client_certificate_stops_the_run_saying_why(
    mtls: MutualTLS,
    session: requests.Session,
    ca_file: str,
    events: pd.DataFrame,
    now: pd.Timestamp,
) -> None:
    session.verify = ca_file
    started = time.monotonic()
    with pytest.raises(
        cc.TransportError, match=r"cannot reach the API at localhost:\d+: TLS.*set session\.cert"
    ):
        cc.Client(mtls.url, KEY, session=session).send_events(events, now=now)
    assert time.monotonic() - started < 10
    assert mtls.clients == []


def test_an_untrusted_server_names_the_sessions_fix(
    mtls: MutualTLS, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    with pytest.raises(cc.TransportError, match=r"not trusted.*set session\.verify"):
        cc.Client(mtls.url, KEY, session=session).send_events(events, now=now)


# -- retries and redirects -------------------------------------------------------------------
def test_a_5xx_is_retried(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    sandbox.script_faults([cc.Fault("5xx", status=503)])
    result = cc.Client(sandbox.base_url, sandbox.api_key, session=session).send_events(
        events, now=now
    )
    assert result.ok
    assert result.chunks["attempts"].tolist() == [2]
    assert batch_statuses(sandbox) == {
        "POST /v1/events/batch 503": 1,
        "POST /v1/events/batch 200": 1,
    }
    assert sandbox.stats()["stored"] == len(events)


def test_a_redirect_is_not_followed(
    odd_server: Callable[..., str],
    session: requests.Session,
    events: pd.DataFrame,
    now: pd.Timestamp,
) -> None:
    elsewhere: set[tuple[str, int]] = set()
    target = odd_server(200, b'{"accepted":true}', peers=elsewhere)
    url = odd_server(307, headers={"Location": f"{target}/v1/events/batch"})
    with pytest.raises(cc.TransportError, match="redirects are not followed"):
        cc.Client(url, KEY, session=session).send_events(events, now=now)
    assert elsewhere == set()  # the key never went there


# -- deadlines and interrupts ----------------------------------------------------------------
def test_the_run_deadline_cuts_off_a_stalled_answer(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    sandbox.script_faults([cc.Fault("stall", seconds=20.0)])
    client = cc.Client(sandbox.base_url, sandbox.api_key, session=session, deadline=1.0)
    started = time.monotonic()
    result = client.send_events(events, now=now)
    assert time.monotonic() - started < 6.0  # the stall lasts 20 s, read_timeout 30 s
    assert not result.ok
    assert result.rows["error"].str.contains("deadline").all()


def test_an_interrupt_ends_the_run_while_an_answer_stalls(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    sandbox.script_faults([cc.Fault("stall", seconds=20.0)])
    sending = threading.Event()

    class Noting(requests.auth.AuthBase):  # runs as the request goes out
        def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
            sending.set()
            return r

    session.auth = Noting()
    client = cc.Client(sandbox.base_url, sandbox.api_key, session=session)
    main = threading.get_ident()
    interrupted_at: list[float] = []

    def interrupt() -> None:
        # Ctrl-C only once the request is in flight (not while the package is imported)
        if sending.wait(30):
            time.sleep(0.3)
            interrupted_at.append(time.monotonic())
            signal.pthread_kill(main, signal.SIGINT)

    # an earlier test's library may have replaced the SIGINT handler; this test is about
    # Ctrl-C as Python delivers it, so Python's own handler is in place for its length
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killer = threading.Thread(target=interrupt, daemon=True)
    try:
        killer.start()
        with pytest.raises(cc.Interrupted) as info:
            client.send_events(events, now=now)
        ended = time.monotonic()
    finally:
        signal.signal(signal.SIGINT, previous)
        killer.join(1)
    assert ended - interrupted_at[0] < 5.0  # the stalled request abandoned, not awaited
    assert info.value.counts["failed"] == len(events)


# -- the key stays home ----------------------------------------------------------------------
def test_the_key_is_absent_from_output_reprs_and_result_files(
    odd_server: Callable[..., str],
    session: requests.Session,
    events: pd.DataFrame,
    now: pd.Timestamp,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo = f'{{"error":"bad request","headers":{{"Authorization":"Bearer {KEY}"}}}}'.encode()
    url = odd_server(400, echo)
    client = cc.Client(url, KEY, session=session)
    with caplog.at_level(logging.DEBUG):  # urllib3's debug lines included
        result = client.send_events(events, now=now)
    rows, chunks = tmp_path / "rows.csv", tmp_path / "chunks.parquet"
    result.rows.to_csv(rows)
    result.chunks.to_parquet(chunks)
    out = capsys.readouterr()
    texts = repr(result) + repr(client) + repr(client.config) + caplog.text + out.out + out.err
    texts += rows.read_text() + result.chunks.to_csv()
    assert "bad request" in texts  # the body is kept...
    assert KEY not in texts  # ...without the key
    assert KEY.encode() not in chunks.read_bytes()


def test_the_key_is_absent_from_a_transport_error_even_pickled_or_with_locals(
    mtls: MutualTLS,
    session: requests.Session,
    ca_file: str,
    events: pd.DataFrame,
    now: pd.Timestamp,
) -> None:
    session.verify = ca_file  # no client certificate: the run stops
    with pytest.raises(cc.TransportError) as info:
        cc.send_events(events, mtls.url, KEY, session=session, now=now)
    exc = info.value
    rendered = "".join(
        traceback.TracebackException.from_exception(exc, capture_locals=True).format()
    )
    assert "session" in rendered  # locals were captured
    assert KEY not in str(exc) + repr(exc) + rendered
    assert KEY.encode() not in pickle.dumps(exc)


# -- refused ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"proxy": "http://127.0.0.1:3128"}, "proxy="),
        ({"ca_bundle": "CA"}, "ca_bundle="),
        ({"verify": False}, "verify=False"),
        ({"trust_env": True}, "trust_env=True"),
    ],
)
def test_options_the_session_owns_are_refused_with_it(
    option: dict[str, object], named: str, session: requests.Session, ca_file: str
) -> None:
    if option.get("ca_bundle") == "CA":
        option = {"ca_bundle": ca_file}
    with pytest.raises(cc.ConfigurationError, match=f"{named}.*configure it there"):
        cc.Client("https://localhost:8443", KEY, session=session, **option)  # type: ignore[arg-type]


def test_something_else_than_a_requests_session_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match=r"must be a requests\.Session, got dict"):
        cc.Client("https://localhost:8443", KEY, session={"verify": False})  # type: ignore[arg-type]


def test_a_session_header_carrying_the_keys_header_is_refused(session: requests.Session) -> None:
    session.headers["Authorization"] = "Bearer corporate"
    with pytest.raises(cc.ConfigurationError, match="auth_header='x-api-key'"):
        cc.Client("https://localhost:8443", KEY, session=session)
    cc.Client("https://localhost:8443", KEY, session=session, auth_header="x-api-key")


def test_a_session_without_verification_is_refused_for_a_remote_host(
    session: requests.Session,
) -> None:
    session.verify = False
    with pytest.raises(cc.ConfigurationError, match=r"session\.verify = False is refused"):
        cc.Client("https://api.example.com", KEY, session=session)


def test_a_session_changed_after_the_client_was_made_is_checked_again_at_send(
    session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    client = cc.Client("https://api.example.com", KEY, session=session)
    session.verify = False
    with pytest.raises(cc.ConfigurationError, match=r"session\.verify = False is refused"):
        client.send_events(events, now=now)


def test_a_session_proxy_for_a_plain_http_base_url_is_refused(
    sandbox: cc.Sandbox, session: requests.Session
) -> None:
    session.proxies = {"http": "http://127.0.0.1:3128"}
    with pytest.raises(cc.ConfigurationError, match="proxy would read the key"):
        cc.Client(sandbox.base_url, sandbox.api_key, session=session)


@pytest.mark.parametrize("path", ["pool", "session"])
@pytest.mark.parametrize("offset", [285, 295, 299])
def test_a_key_straddling_the_kept_excerpt_of_an_error_body_leaves_no_part_of_it(
    path: str,
    offset: int,
    odd_server: Callable[..., str],
    events: pd.DataFrame,
    now: pd.Timestamp,
) -> None:
    # the excerpt keeps 300 characters: a key echoed across the cut must not survive in part
    body = (b"x" * offset + f"Bearer {KEY} echoed".encode()).ljust(70_000, b"y")
    url = odd_server(400, body)
    options: dict[str, object] = {} if path == "pool" else {"session": requests.Session()}
    result = cc.Client(url, KEY, retry=cc.RetryPolicy(max_attempts=1), **options).send_events(  # type: ignore[arg-type]
        events, now=now
    )
    texts = result.rows.to_csv() + result.chunks.to_csv()
    assert "x" * 10 in texts  # the excerpt was kept...
    assert KEY[:6] not in texts  # ...and no part of the key in it


def test_a_session_hook_that_raises_stops_the_run_without_the_key_in_any_frame(
    sandbox: cc.Sandbox, session: requests.Session, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    def hook(response: requests.Response, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the audit hook failed")

    session.hooks["response"].append(hook)
    with pytest.raises(cc.TransportError, match="the session raised RuntimeError") as info:
        cc.send_events(events, sandbox.base_url, sandbox.api_key, session=session, now=now)
    exc = info.value
    rendered = "".join(
        traceback.TracebackException.from_exception(exc, capture_locals=True).format()
    )
    assert sandbox.api_key not in str(exc) + rendered
    assert exc.retryable is False
