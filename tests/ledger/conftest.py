"""Every backend of the ledger, by name: the same tests run against each."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.ledger.servers import S3_BUCKET, PostgresServer

BACKENDS = ["sqlite", "postgres", "file", "s3"]


def location(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger of ``backend`` (each call a new one): a SQLite file, a PostgreSQL
    schema of its own (the URL holds the password canary), a local folder of segments, an
    S3 prefix."""
    if backend == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    if backend == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres")
        return server.url(server.fresh_schema())
    if backend == "file":
        return (tmp_path / "segments").as_uri() + "/"
    assert backend == "s3"
    request.getfixturevalue("s3")
    return f"s3://{S3_BUCKET}/{uuid.uuid4().hex[:12]}/"


@pytest.fixture(params=BACKENDS)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger of each backend in turn."""
    return location(request.param, request, tmp_path)


@pytest.fixture(params=["postgres", "file"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger of each backend made for machines that share no disk."""
    return location(request.param, request, tmp_path)
