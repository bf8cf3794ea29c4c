"""HTTP layer: routing, authentication, content type, strict JSON, framing, logs."""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import socket

import pytest

from churn_connector._sandbox import Sandbox
from tests.sandbox.conftest import Api, ApiFor, MakeEvent, MakeSandbox


def _split(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


# --------------------------------------------------------------------------- routing


@pytest.mark.parametrize(
    "path", ["/v1/events", "/v1/events/batch/", "/v2/events/batch", "/", "/v1/identity"]
)
def test_unknown_path_is_404(api: Api, path: str) -> None:
    response = api.post(path, {})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_known_path_with_another_method_is_405_with_allow_post(
    api: Api, sandbox: Sandbox, method: str
) -> None:
    response = api.session.request(method, sandbox.base_url + "/v1/events/batch", timeout=5)
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_head_gets_405_without_a_body(api: Api, sandbox: Sandbox) -> None:
    response = api.session.head(sandbox.base_url + "/v1/identify", timeout=5)
    assert response.status_code == 405
    assert response.content == b""


def test_query_string_is_rejected(api: Api, make_event: MakeEvent) -> None:
    response = api.post("/v1/events/batch?debug=1", {"events": [make_event()]})
    assert response.status_code == 400


# --------------------------------------------------------------------------- auth


@pytest.mark.parametrize("header", ["Authorization", "X-API-Key"])
def test_both_auth_headers_are_accepted(
    api: Api, sandbox: Sandbox, make_event: MakeEvent, header: str
) -> None:
    assert api.batch([make_event()], header=header).status_code == 200
    assert len(sandbox.events()) == 1


def test_bearer_scheme_is_case_insensitive(api: Api, make_event: MakeEvent) -> None:
    headers = {"Authorization": f"bearer {api.sandbox.api_key}"}
    response = api.batch([make_event()], key=None, headers=headers)
    assert response.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-API-Key": "sk_test_wrong"},
        {"Authorization": "Bearer sk_test_wrong"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
        {"X-API-Key": ""},
    ],
    ids=["missing", "unknown-x-api-key", "unknown-bearer", "basic-scheme", "no-token", "empty"],
)
def test_missing_or_unknown_key_is_401_with_www_authenticate(
    api: Api, sandbox: Sandbox, make_event: MakeEvent, headers: dict[str, str]
) -> None:
    response = api.batch([make_event()], key=None, headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"
    assert sandbox.events().empty


def test_two_different_keys_in_one_request_are_refused(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(api_keys=["key_one", "key_two"])
    response = api_for(sandbox).batch(
        [make_event()], key="key_one", headers={"X-API-Key": "key_two"}
    )
    assert response.status_code == 401


def test_auth_is_checked_before_content_type_and_body(api: Api) -> None:
    response = api.post("/v1/events/batch", raw=b"not json", key=None, content_type="text/plain")
    assert response.status_code == 401


def test_401_body_never_echoes_the_key(api: Api, make_event: MakeEvent) -> None:
    response = api.batch([make_event()], key="sk_test_leaky_value")
    assert "sk_test_leaky_value" not in response.text


# --------------------------------------------------------------------------- content type


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"],
)
def test_json_content_types_are_accepted(
    api: Api, make_event: MakeEvent, content_type: str
) -> None:
    response = api.batch([make_event()], content_type=content_type)
    assert response.status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json-patch+json",
        "application/json; charset=latin-1",
        "text/json",
    ],
)
def test_other_content_types_are_415(
    api: Api, sandbox: Sandbox, make_event: MakeEvent, content_type: str | None
) -> None:
    response = api.batch([make_event()], content_type=content_type)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    assert sandbox.events().empty


# --------------------------------------------------------------------------- strict JSON


@pytest.mark.parametrize(
    "raw",
    [
        b'{"events": [',
        b"",
        b'{"events": [{"external_user_id": "u", "properties": {"x": NaN}}]}',
        b'{"events": [{"properties": {"x": Infinity}}]}',
        b'{"events": [{"properties": {"x": -Infinity}}]}',
        b'{"events": [], "events": []}',
        b'{"events": [{"properties": {"a": 1, "a": 2}}]}',
        b'{"events": ["\xff"]}',
        b'\xef\xbb\xbf{"events": []}',
        b'{"events": ["\\ud800"]}',
        b"{'events': []}",
    ],
    ids=[
        "truncated",
        "empty",
        "nan",
        "infinity",
        "minus-infinity",
        "duplicate-top-key",
        "duplicate-nested-key",
        "invalid-utf8",
        "bom",
        "lone-surrogate",
        "single-quotes",
    ],
)
def test_invalid_json_is_400_and_stores_nothing(api: Api, sandbox: Sandbox, raw: bytes) -> None:
    response = api.post("/v1/events/batch", raw=raw)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert sandbox.events().empty


# --------------------------------------------------------------------------- framing


def test_body_above_max_body_bytes_is_413(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(max_body_bytes=2000)
    api = api_for(sandbox)
    response = api.batch([make_event(i) for i in range(20)])
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert sandbox.events().empty


def test_body_at_max_body_bytes_is_accepted(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    raw = json.dumps({"events": [make_event()]}).encode()
    sandbox = make_sandbox(max_body_bytes=len(raw))
    assert api_for(sandbox).post("/v1/events/batch", raw=raw).status_code == 200


def test_chunked_body_without_content_length_is_411(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    raw = json.dumps({"events": [make_event()]}).encode()
    response = api.session.post(
        sandbox.base_url + "/v1/events/batch",
        data=iter([raw]),  # a generator makes requests use Transfer-Encoding: chunked
        headers={"X-API-Key": sandbox.api_key, "Content-Type": "application/json"},
        timeout=5,
    )
    assert response.status_code == 411
    assert sandbox.events().empty


def test_post_without_content_length_is_411(sandbox: Sandbox) -> None:
    request = (
        "POST /v1/events/batch HTTP/1.1\r\nHost: sandbox\r\n"
        f"X-API-Key: {sandbox.api_key}\r\nContent-Type: application/json\r\n\r\n"
    ).encode()
    with socket.create_connection(_split(sandbox.base_url), timeout=5) as sock:
        sock.sendall(request)
        response = http.client.HTTPResponse(sock)
        response.begin()
        try:
            assert response.status == 411
        finally:
            response.close()


def test_keep_alive_connection_survives_error_responses(
    sandbox: Sandbox, make_event: MakeEvent
) -> None:
    body = json.dumps({"events": [make_event()]}).encode()
    auth = {"X-API-Key": sandbox.api_key, "Content-Type": "application/json"}
    calls = [
        ("/nope", auth, 404),
        ("/v1/events/batch", {"Content-Type": "application/json"}, 401),
        ("/v1/events/batch", {**auth, "Content-Type": "text/plain"}, 415),
        ("/v1/events/batch", auth, 200),
    ]
    conn = http.client.HTTPConnection(*_split(sandbox.base_url), timeout=5)
    try:
        ports, statuses = set(), []
        for path, headers, _ in calls:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
            ports.add(conn.sock.getsockname()[1])
    finally:
        conn.close()
    assert statuses == [status for _, _, status in calls]
    assert len(ports) == 1  # one TCP connection: every body was read exactly


# --------------------------------------------------------------------------- logs


def test_requests_log_redacts_keys_and_fingerprints_bodies(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    raw = json.dumps({"events": [make_event()]}).encode()
    api.post("/v1/events/batch", raw=raw, header="Authorization")
    api.post("/v1/events/batch", raw=raw, header="X-API-Key")
    log = sandbox.requests_log()
    assert list(log.columns) == [
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
    assert log["status"].tolist() == [200, 200]
    assert log["headers"][0]["authorization"] == "<redacted>"
    assert log["headers"][1]["x-api-key"] == "<redacted>"
    assert log["body_len"].tolist() == [len(raw)] * 2
    assert log["body_sha256"].tolist() == [hashlib.sha256(raw).hexdigest()] * 2
    assert sandbox.api_key not in repr(log.to_dict("records"))


def test_server_logs_stay_silent_and_never_contain_the_key(
    api: Api,
    sandbox: Sandbox,
    make_event: MakeEvent,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG, logger="churn_connector.sandbox")
    api.batch([make_event()])
    api.batch([make_event()], key="sk_test_not_a_key")
    api.post("/nope", {})
    api.post(f"/v1/events/batch?api_key={sandbox.api_key}", {"events": [make_event()]})
    assert caplog.records  # the handler did log, at DEBUG, to the package logger
    assert sandbox.api_key not in caplog.text
    assert "sk_test_not_a_key" not in caplog.text
    assert capfd.readouterr().err == ""
