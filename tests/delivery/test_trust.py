"""Trust: TLS with a private CA, proxies only as CONNECT tunnels for https, and a key that goes
nowhere but the API (not to a proxy, not into results, logs, exceptions or locals)."""

from __future__ import annotations

import logging
import pickle
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
import requests
import trustme

import churn_connector as cc
from churn_connector._cli import main
from tests.netfixtures import ConnectProxy, https_server

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


KEY = "sk_test_CANARY_trust_0123456789"


@pytest.fixture
def https_url(ca: trustme.CA) -> Iterator[str]:
    with https_server(ca) as port:
        yield f"https://localhost:{port}"


def send(url: str, events: pd.DataFrame, now: pd.Timestamp, **options: object) -> cc.SendResult:
    return cc.Client(url, KEY, **options).send_events(events, now=now)  # type: ignore[arg-type]


def test_a_private_ca_is_trusted_when_named(
    https_url: str, ca_file: str, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    assert send(https_url, events, now, ca_bundle=ca_file).ok


def test_an_unknown_ca_is_refused_naming_the_host(
    https_url: str, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    with pytest.raises(cc.TransportError, match=r"localhost:\d+.*certificate"):
        send(https_url, events, now)


def test_an_untrusted_certificate_is_not_retryable(
    https_url: str, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    # the CA must be named first: Airflow fails the task without retrying
    with pytest.raises(cc.TransportError) as info:
        send(https_url, events, now)
    assert info.value.retryable is False


def test_the_cli_names_its_own_flag_for_a_private_ca(
    https_url: str,
    events: pd.DataFrame,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the message is made on a sending thread: it speaks as the command line does
    monkeypatch.setenv("CHURN_API_KEY", KEY)
    events.to_parquet(tmp_path / "events.parquet")
    assert main(["send", "events", str(tmp_path / "events.parquet"), "--base-url", https_url]) == 3
    err = capsys.readouterr().err
    assert "not trusted" in err
    assert err.strip().endswith(
        "pass --ca-bundle <your CA>.pem for a private CA. The run was stopped."
    )


_CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


def _through(path: str) -> dict[str, object]:
    """The options that pick a path: the package's own pool, or a plain requests.Session."""
    return {} if path == "pool" else {"session": requests.Session()}


@pytest.mark.parametrize("path", ["pool", "session"])
@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_both_paths_trust_a_private_ca_named_in_the_variables_requests_reads(
    path: str,
    variable: str,
    https_url: str,
    ca_file: str,
    events: pd.DataFrame,
    now: pd.Timestamp,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in _CA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, ca_file)
    assert send(https_url, events, now, **_through(path)).ok


def test_verify_false_is_refused_for_a_remote_host() -> None:
    with pytest.raises(cc.ConfigurationError, match="verify=False"):
        cc.Client("https://api.example.com", KEY, verify=False)


def test_verify_false_works_for_a_local_test_server(
    https_url: str, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    assert send(https_url, events, now, verify=False).ok


def test_tls_to_a_plain_http_port_says_so(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    url = sandbox.base_url.replace("http://", "https://")
    with pytest.raises(cc.TransportError, match="does not speak TLS on this port") as info:
        send(url, events, now)
    assert info.value.retryable is False  # the URL must change


def test_environment_proxies_are_ignored_unless_asked_for(
    https_url: str,
    ca_file: str,
    events: pd.DataFrame,
    now: pd.Timestamp,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert send(https_url, events, now, ca_bundle=ca_file).ok
        assert proxy.requests == []
        assert send(https_url, events, now, ca_bundle=ca_file, trust_env=True).ok
        assert proxy.requests and proxy.requests[0].startswith(b"CONNECT localhost:")


def test_a_proxy_sees_a_tls_tunnel_and_never_the_key(
    https_url: str, ca_file: str, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    with ConnectProxy() as proxy:
        assert send(https_url, events, now, ca_bundle=ca_file, proxy=proxy.url).ok
        assert proxy.requests[0].startswith(b"CONNECT ")
        assert len(proxy.received) > 1000  # the whole exchange went through it...
        assert KEY.encode() not in proxy.received  # ...encrypted end to end


def test_a_proxy_for_a_plain_http_base_url_is_refused(sandbox: cc.Sandbox) -> None:
    with pytest.raises(cc.ConfigurationError, match="only used for an https"):
        cc.Client(sandbox.base_url, KEY, proxy="http://127.0.0.1:3128")


# -- the key stays home ---------------------------------------------------------------------
def test_a_key_echoed_by_the_server_is_scrubbed_everywhere(
    odd_server: Callable[..., str],
    events: pd.DataFrame,
    now: pd.Timestamp,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    echo = f'{{"error":"bad request","headers":{{"Authorization":"Bearer {KEY}"}}}}'.encode()
    url = odd_server(400, echo)
    with caplog.at_level(logging.DEBUG):
        result = cc.Client(url, KEY).send_events(events, now=now)
    texts = result.rows.to_csv() + result.chunks.to_csv() + repr(result) + caplog.text
    assert "bad request" in texts  # the body is kept...
    assert KEY not in texts  # ...without the key
    with pytest.raises(cc.DeliveryError) as info:
        result.raise_for_failures()
    assert KEY.encode() not in pickle.dumps(info.value)
    # and the CLI's result files and output
    path = tmp_path / "events.parquet"
    events.to_parquet(path)
    monkeypatch.setenv("CHURN_API_KEY", KEY)
    rows, chunks = tmp_path / "rows.csv", tmp_path / "chunks.parquet"
    args = ["send", "events", str(path), "--base-url", url, "--rows", str(rows)]
    assert main([*args, "--results", str(chunks)]) == 2
    out = capsys.readouterr()
    assert KEY not in out.out + out.err + rows.read_text()
    assert KEY.encode() not in chunks.read_bytes()


def test_repr_of_a_half_built_client_does_not_raise() -> None:
    client = cc.Client.__new__(cc.Client)
    assert "Client(" in repr(client)


def _with_locals(exc: BaseException) -> str:
    return "".join(traceback.TracebackException.from_exception(exc, capture_locals=True).format())


def test_no_frame_holds_the_key_in_a_local_variable_when_config_fails() -> None:
    with pytest.raises(cc.ConfigurationError) as info:
        cc.Client("https://api.example.com", KEY, batch_size=900)
    assert KEY not in _with_locals(info.value)


def test_no_frame_holds_the_key_in_a_local_variable_when_the_api_refuses_it(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    with pytest.raises(cc.AuthenticationError) as info:
        cc.send_events(events, sandbox.base_url, KEY, now=now)
    rendered = _with_locals(info.value)
    assert "sandbox" in rendered or "send_events" in rendered  # locals were captured
    assert KEY not in rendered
