"""The ledger's servers for the tests: a real PostgreSQL server and an S3-compatible one
(moto's server mode), each started on 127.0.0.1 when a test first asks for it and stopped
at the end of the session. Loaded by the root conftest (``pytest_plugins``), so the Airflow
and Spark suites have them too. Under pytest-xdist each worker is a session: it starts
servers of its own (own folder, own port), so a test that stops its server stops no other
worker's.

PostgreSQL refuses to run as root, and the tests run as root on CI: the server runs as the
unprivileged ``postgres`` system user (``runuser``), in a temporary folder that user owns.
Without the binaries or that user the tests fail, saying what is missing: they never skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("CHURN_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
# the ledger role's password: a canary that must appear in no output, message or file
PG_PASSWORD = "pg_CANARY_9d1e4b7a2c"
PG_USER = "churn"
S3_BUCKET = "churn-ledger"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class ServerMissing(RuntimeError):
    """What a server needs is not on this machine (the message says what)."""


class PostgresServer:
    """A PostgreSQL server of our own in a temporary folder, on a free port of 127.0.0.1.

    The role ``churn`` logs in over TCP with a password (SCRAM); the superuser ``postgres``
    without one (trust, for the tests' own set-up). ``fsync=False`` (the tests'): a test
    server's data need not survive a power cut, and tests run faster without the disk
    waits; the benchmarks keep PostgreSQL's default.
    """

    def __init__(self, *, fsync: bool = False) -> None:
        self.fsync = fsync
        missing = [n for n in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / n).exists()]
        if missing:
            raise ServerMissing(
                f"the ledger's tests need PostgreSQL's server binaries in {PG_BIN} "
                f"({', '.join(missing)} missing): apt-get install postgresql-15 (or set "
                "CHURN_TEST_PG_BIN to their folder)"
            )
        self.as_root = os.geteuid() == 0
        if self.as_root:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerMissing(
                    "the ledger's tests run PostgreSQL as the unprivileged system user "
                    "'postgres' (it refuses to run as root), and there is none: "
                    "apt-get install postgresql-15 creates it"
                ) from None
            if shutil.which("runuser") is None:
                raise ServerMissing("the ledger's tests need runuser (util-linux)")
        self.home = Path(tempfile.mkdtemp(prefix="churn-pg-"))
        if self.as_root:
            os.chown(self.home, account.pw_uid, account.pw_gid)
        self.data = self.home / "data"
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
                  "-E", "UTF8", "--locale=C.UTF-8")  # fmt: skip
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            "host all postgres 127.0.0.1/32 trust\n"
            f"host all {PG_USER} 127.0.0.1/32 scram-sha-256\n"
        )
        # a free port can be taken before the server binds it (by another pytest-xdist
        # worker's servers, each worker starting its own): then another port
        for attempt in range(3):
            self.port = free_port()
            try:
                self.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        self.admin(
            f"CREATE ROLE {PG_USER} LOGIN PASSWORD '{PG_PASSWORD}'",
            f"CREATE DATABASE ledger OWNER {PG_USER}",
        )

    def _run(self, program: str, *args: str, timeout: float = 120) -> str:
        command = [str(PG_BIN / program), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=self.home, check=False
        )
        if done.returncode:
            log = self.home / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{program} failed: {done.stderr or done.stdout}\n{tail}")
        return done.stdout

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 "
            f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.home / "log"), "-w", "-t",
                  "60", "-o", options, "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-m", mode, "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def close(self) -> None:
        if self.running():
            self.stop("immediate")
        shutil.rmtree(self.home, ignore_errors=True)

    def admin(self, *statements: str, database: str = "postgres") -> None:
        """Run statements as the superuser (over the server's Unix socket)."""
        import psycopg  # noqa: PLC0415 - the postgres extra, imported when a test needs it

        with psycopg.connect(
            host=str(self.home), port=self.port, user="postgres", dbname=database, autocommit=True
        ) as conn:
            for statement in statements:
                conn.execute(statement.encode())

    def url(self, schema: str | None = None, *, password: bool = True) -> str:
        """The ledger database's URL as the ``churn`` role (in its own schema, if given)."""
        secret = f":{PG_PASSWORD}" if password else ""
        tail = f"?options=-csearch_path%3D{schema}" if schema else ""
        return f"postgresql://{PG_USER}{secret}@127.0.0.1:{self.port}/ledger{tail}"

    def fresh_schema(self) -> str:
        """A new empty schema of the ledger database, owned by ``churn``."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.admin(f"CREATE SCHEMA {name} AUTHORIZATION {PG_USER}", database="ledger")
        return name


class S3Server:
    """moto's S3-compatible server on a free port of 127.0.0.1, in a process of its own;
    clients find it through ``AWS_ENDPOINT_URL_S3`` (set for the session)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": self.endpoint,
        }
        try:
            wait_for_port(self.port, 60)
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (started on first use)."""
    try:
        server = PostgresServer()
    except ServerMissing as exc:
        pytest.fail(str(exc), pytrace=False)  # never a skip: CI must have it
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_url(postgres: PostgresServer) -> str:
    """A PostgreSQL ledger URL of its own (a fresh schema), password included."""
    if not postgres.running():  # a test that stopped it and failed before it restarted it
        postgres.start()
    return postgres.url(postgres.fresh_schema())


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """The session's S3-compatible server, with the environment that finds it."""
    server = S3Server()
    saved = {name: os.environ.get(name) for name in server.env}
    os.environ.update(server.env)
    try:
        import s3fs  # noqa: PLC0415 - the s3 extra, imported when a test needs it

        s3fs.S3FileSystem().mkdir(S3_BUCKET)
        yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.close()


@pytest.fixture
def s3_url(s3: S3Server) -> str:
    """An object-storage ledger URL of its own (a fresh prefix of the test bucket)."""
    return f"s3://{S3_BUCKET}/{uuid.uuid4().hex[:12]}/"
