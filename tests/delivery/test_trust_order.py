"""One trust order, on the sync path (urllib3, and a requests session of yours) and the async
one (httpx), over real TLS on 127.0.0.1: ``ca_bundle``, ``REQUESTS_CA_BUNDLE``,
``CURL_CA_BUNDLE``, ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, then the store ``ca_store`` names.

Two throw-away CAs (trustme, on cryptography): the server's, and another. A source set to
the server's CA above one set to the other is trusted; below it, the run is refused.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import requests
import trustme
import truststore

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._delivery.connections import ssl_context
from tests.netfixtures import https_server

pytestmark = pytest.mark.e2e  # real TLS throughout

KEY = "sk_test_CANARY_trust_order_0123456789"
Path_ = Literal["sync", "async", "session"]
PATHS: tuple[Path_, ...] = ("sync", "async", "session")
VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")
# the order, highest first (SSL_CERT_DIR is SSL_CERT_FILE's step: both are loaded)
ORDER = ("ca_bundle", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")


@pytest.fixture
def https_url(ca: trustme.CA) -> Iterator[str]:
    with https_server(ca) as port:
        yield f"https://localhost:{port}"


@pytest.fixture
def other_file(tmp_path: Path) -> str:
    """A CA that did not sign the server's certificate."""
    path = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def hashed_folder(ca_file: str, folder: Path) -> str:
    """A folder of hashed certificates (OpenSSL's ``-CApath`` form) holding ``ca_file``."""
    folder.mkdir()
    openssl = shutil.which("openssl")
    assert openssl is not None, "the openssl command makes the folder's hashed names"
    found = subprocess.run(
        [openssl, "x509", "-subject_hash", "-noout", "-in", ca_file],
        capture_output=True,
        text=True,
        check=True,
    )
    shutil.copy(ca_file, folder / f"{found.stdout.strip()}.0")
    return str(folder)


def track(path: Path_, url: str, **options: Any) -> int | None:
    """One ``track()`` on ``path``; its HTTP status."""
    if path == "async":

        async def run() -> cc.TrackResult:
            async with cc.AsyncClient(url, KEY, **options) as client:
                return await client.track("u1", "login")

        return asyncio.run(run()).status
    if path == "session":
        options["session"] = requests.Session()
    client = cc.Client(url, KEY, **options)
    try:
        return client.track("u1", "login").status
    finally:
        client.close()


def trusted(path: Path_, url: str, **options: Any) -> bool:
    try:
        return track(path, url, **options) == 200
    except cc.TransportError as exc:
        if "not trusted" not in str(exc):
            raise
        return False


def given(source: str, ca: str, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> None:
    if source == "ca_bundle":
        options["ca_bundle"] = ca
    else:
        monkeypatch.setenv(source, ca)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("variable", VARIABLES)
def test_each_variable_alone_is_trusted(
    path: Path_,
    variable: str,
    https_url: str,
    ca_file: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not trusted(path, https_url)  # certifi's CAs do not hold the throw-away one
    value = hashed_folder(ca_file, tmp_path / "certs") if variable == "SSL_CERT_DIR" else ca_file
    monkeypatch.setenv(variable, value)
    assert trusted(path, https_url)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("step", range(len(ORDER) - 1), ids=lambda i: f"{ORDER[i]}>{ORDER[i + 1]}")
def test_a_source_above_decides_and_the_one_below_is_not_read(
    path: Path_,
    step: int,
    https_url: str,
    ca_file: str,
    other_file: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    above, below = ORDER[step], ORDER[step + 1]
    if path == "session" and above == "ca_bundle":
        return _session_refuses_ca_bundle(https_url, ca_file)
    right: dict[str, Any] = {}
    given(above, ca_file, monkeypatch, right)
    given(below, other_file, monkeypatch, right)
    assert trusted(path, https_url, **right)
    wrong: dict[str, Any] = {}
    given(above, other_file, monkeypatch, wrong)
    given(below, ca_file, monkeypatch, wrong)
    assert not trusted(path, https_url, **wrong)


def _session_refuses_ca_bundle(url: str, ca_file: str) -> None:
    # a session decides its own trust: ca_bundle= with it is refused, naming the fix
    with pytest.raises(cc.ConfigurationError, match="ca_bundle= cannot be combined"):
        track("session", url, ca_bundle=ca_file)


@pytest.mark.parametrize("path", ["sync", "async"])
def test_ssl_cert_file_and_dir_are_both_read(
    path: Path_,
    https_url: str,
    ca_file: str,
    other_file: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", other_file)
    monkeypatch.setenv("SSL_CERT_DIR", hashed_folder(ca_file, tmp_path / "certs"))
    assert trusted(path, https_url)


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_variable_stands_above_the_system_store(
    path: Path_, https_url: str, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    assert trusted(path, https_url, ca_store="system")


@pytest.mark.parametrize("path", ["sync", "async"])
def test_the_system_store_is_asked_through_truststore(path: Path_, https_url: str) -> None:
    # the operating system's store does not hold the throw-away CA: truststore's check,
    # at the handshake, refuses it as certifi's would
    assert not trusted(path, https_url, ca_store="system")
    config = cc.ClientConfig.create(https_url, KEY, ca_store="system")

    assert isinstance(ssl_context(config), truststore.SSLContext)
    assert not isinstance(
        ssl_context(config.with_options(ca_store="certifi")), truststore.SSLContext
    )


def test_the_system_store_without_truststore_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "truststore", None)  # as if not installed
    with pytest.raises(cc.ConfigurationError, match=r"churn_connector\[truststore\]"):
        cc.Client("https://api.example.com", KEY, ca_store="system")


def test_an_unknown_store_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="ca_store must be 'certifi' or 'system'"):
        cc.Client("https://api.example.com", KEY, ca_store="windows")  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("variable", VARIABLES)
def test_a_variable_naming_nothing_is_refused_by_name(
    path: Path_,
    variable: str,
    https_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # never a silent fall-through to the next source
    monkeypatch.setenv(variable, str(tmp_path / "missing.pem"))
    with pytest.raises(cc.ConfigurationError, match=variable):
        track(path, https_url)


def test_the_command_line_takes_the_store(
    https_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", KEY)
    args = ["track", "login", "--user", "u1", "--base-url", https_url, "--ca-store", "system"]
    assert main(args) == 3  # the system's store does not hold the throw-away CA
    assert "not trusted" in capsys.readouterr().err
