"""A fault-injecting HTTP/1.1 proxy for client tests, served by an asyncio loop in a thread.

It listens on 127.0.0.1, forwards to an upstream on 127.0.0.1 (a ``Sandbox``, say) and applies
one fault mode per request: a scripted list first, then the default ``mode``::

    with cc.Sandbox() as sb, FaultProxy(sb.base_url, script=["reset_after_store"]) as proxy:
        client = cc.Client(proxy.url, sb.api_key)
        ...  # the first request is stored upstream but its answer never arrives
        assert proxy.mode_counts["reset_after_store"] == 1

It knows just enough HTTP/1.1 for keep-alive clients: one request at a time per connection,
bodies framed by ``Content-Length`` (chunked bodies are refused), 1xx answers passed through.
Each client connection gets its own upstream connection, so keep-alive reuse is mirrored; an
upstream that closes an idle connection is redialled on the next request, not passed on.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Literal, Self, get_args
from urllib.parse import urlsplit

Mode = Literal[
    "pass",
    "reset_mid_body",
    "reset_after_store",
    "half_response",
    "stall",
    "trickle",
    "blackhole",
    "early_hints",
    "too_large",
    "unauthorized",
]
MODES: Final[tuple[Mode, ...]] = get_args(Mode)

EARLY_HINTS: Final = b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"

_HOST: Final = "127.0.0.1"
_LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost"})
_HEAD_LIMIT: Final = 64 * 1024
_MAX_BUFFERED: Final = 64 * 1024 * 1024  # bodies are held whole in memory
_READ_CHUNK: Final = 64 * 1024
_MAX_REQUESTS_PER_CONNECTION: Final = 100_000
_MAX_INTERIM: Final = 8  # 1xx answers tolerated before the final one
_MAX_HOLD_READS: Final = 1_000_000
_CONNECT_TIMEOUT: Final = 2.0
_CLOSE_TIMEOUT: Final = 1.0
_START_TIMEOUT: Final = 5.0
_JOIN_TIMEOUT: Final = 5.0
_CANCEL_TIMEOUT: Final = 2.0
# loopback delivers at once, but the upstream must read the partial body before an RST
# (SO_LINGER 0) could discard it, or "the server saw part of a request" would be flaky
_SETTLE_BEFORE_RESET: Final = 0.05

_Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _ProtocolError(Exception):
    """A message the proxy cannot frame; the connection is answered and closed."""


def check_mode(mode: object) -> Mode:
    """``mode`` as a :data:`Mode`, or ValueError (scripts may come from untyped parameters)."""
    for known in MODES:
        if mode == known:
            return known
    raise ValueError(f"unknown fault mode {mode!r}; expected one of {', '.join(MODES)}")


def _upstream_port(upstream: str | tuple[str, int]) -> int:
    if isinstance(upstream, tuple):
        host, port = upstream
    else:
        # accepts "http://127.0.0.1:PORT" (a base_url) as well as "127.0.0.1:PORT"
        parts = urlsplit(upstream if "//" in upstream else f"//{upstream}")
        host, port = parts.hostname or "", parts.port or 0
    if host not in _LOOPBACK_NAMES or not 0 < port < 65536:
        raise ValueError(f"upstream must be 127.0.0.1:PORT, got {upstream!r}")
    return port


@dataclass(frozen=True, slots=True)
class _Head:
    """A request or response head exactly as received, plus its parsed start line and fields."""

    raw: bytes
    start: tuple[str, str, str]  # (method, target, version) or (version, status, reason)
    fields: dict[str, list[str]]  # lower-cased names

    def has_token(self, name: str, token: str) -> bool:
        return any(
            token == part.strip().lower()
            for value in self.fields.get(name, [])
            for part in value.split(",")
        )

    def content_length(self) -> int | None:
        values = {value.strip() for value in self.fields.get("content-length", [])}
        if not values:
            return None
        if len(values) != 1:
            raise _ProtocolError("conflicting Content-Length headers")
        (value,) = values
        if not (value.isascii() and value.isdigit()):
            raise _ProtocolError(f"bad Content-Length {value!r}")
        return int(value)

    def closes(self) -> bool:
        """True when this message ends its connection (``Connection: close`` or HTTP/1.0)."""
        version = self.start[0] if self.start[0].startswith("HTTP/") else self.start[2]
        if version == "HTTP/1.0":
            return not self.has_token("connection", "keep-alive")
        return self.has_token("connection", "close")


def _parse_head(raw: bytes) -> _Head:
    lines = raw[:-4].decode("latin-1").split("\r\n")
    parts = [*lines[0].split(" ", 2), "", ""][:3]
    if not parts[0] or not parts[1]:
        raise _ProtocolError(f"bad start line {lines[0]!r}")
    fields: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise _ProtocolError(f"bad header line {line!r}")
        fields.setdefault(name.lower(), []).append(value.strip())
    return _Head(raw, (parts[0], parts[1], parts[2]), fields)


async def _read_head(reader: asyncio.StreamReader) -> _Head | None:
    """The next head, or None when the peer closed (even mid-head: it went away)."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError as exc:
        raise _ProtocolError("head too large") from exc
    return _parse_head(raw)


def _json_response(status: int, reason: str, message: str, *, close: bool) -> bytes:
    # the sandbox's error shape, so a client parses proxy answers like real ones
    codes = {
        400: "bad_request",
        401: "unauthorized",
        413: "payload_too_large",
        502: "bad_gateway",
        504: "timeout",
    }
    error = {"code": codes.get(status, "error"), "message": message, "details": []}
    payload = json.dumps({"error": error}).encode()
    lines = [
        f"HTTP/1.1 {status} {reason}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        *(["Connection: close"] if close else []),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + payload


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST instead of a FIN (SO_LINGER 0), dropping anything unsent."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _close(writer: asyncio.StreamWriter) -> None:
    """Close with a FIN after flushing, but never wait longer than ``_CLOSE_TIMEOUT``."""
    writer.close()
    try:
        async with asyncio.timeout(_CLOSE_TIMEOUT):
            await writer.wait_closed()
    except (OSError, TimeoutError):
        pass
    finally:
        writer.transport.abort()  # a no-op once closed; frees a peer that stopped reading


@dataclass(frozen=True, slots=True)
class _Response:
    interim: bytes  # 1xx heads, forwarded ahead of the final answer
    head: _Head
    body: bytes
    complete: bool  # False: the upstream closed mid-body
    closes: bool  # the upstream connection ends after this answer

    def data(self) -> bytes:
        return self.interim + self.head.raw + self.body


class _Connection:
    """One client connection and the upstream connection that mirrors it."""

    def __init__(
        self, proxy: FaultProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.upstream: _Stream | None = None

    async def run(self) -> None:
        if self.proxy._take_connection_blackhole():
            await self._blackhole()
            return
        for _ in range(_MAX_REQUESTS_PER_CONNECTION):
            request = await _read_head(self.reader)
            if request is None or not await self._handle(request):
                return

    async def _handle(self, request: _Head) -> bool:
        """Apply one request's mode; True keeps the client connection for the next request."""
        mode = self.proxy._take_request_mode()
        try:
            if request.fields.get("transfer-encoding"):
                raise _ProtocolError("Transfer-Encoding bodies are not supported by the proxy")
            length = request.content_length() or 0
        except _ProtocolError as exc:
            await self._send(_json_response(400, "Bad Request", str(exc), close=True))
            return False
        if mode == "blackhole":
            self.proxy._record(mode)
            await self._blackhole()
            return False
        if mode == "too_large" and length > self.proxy.max_body:
            # read the body anyway: left unread it would be parsed as the next request
            if not await self._discard(length):
                return False
            self.proxy._record(mode)
            message = f"the body exceeds {self.proxy.max_body} bytes (fault proxy)"
            await self._send(_json_response(413, "Payload Too Large", message, close=False))
            return not request.closes()
        if mode == "unauthorized":  # the key refused part way (revoked, rotated)
            if not await self._discard(length):
                return False
            self.proxy._record(mode)
            await self._send(_json_response(401, "Unauthorized", "invalid api key", close=False))
            return not request.closes()
        if length > _MAX_BUFFERED:
            message = f"the proxy buffers at most {_MAX_BUFFERED} bytes"
            await self._send(_json_response(413, "Payload Too Large", message, close=True))
            return False
        body = await self.reader.readexactly(length)
        mode = "pass" if mode == "too_large" else mode
        self.proxy._record(mode)
        if mode == "reset_mid_body":
            await self._reset_mid_body(request, body)
            return False
        try:
            response = await self._exchange(request, body)
        except TimeoutError:
            self._drop_upstream()
            await self._send(_json_response(504, "Gateway Timeout", "upstream timeout", close=True))
            return False
        except (OSError, _ProtocolError) as exc:
            self._drop_upstream()
            await self._send(_json_response(502, "Bad Gateway", str(exc), close=True))
            return False
        if response is None:
            return False  # the upstream closed without answering: so does the proxy
        if response.closes:
            self._drop_upstream()
        delivered = await self._deliver(mode, response)
        return delivered and response.complete and not response.closes and not request.closes()

    async def _deliver(self, mode: Mode, response: _Response) -> bool:
        """Send ``response`` as ``mode`` says; True if the connection can carry on."""
        if mode == "reset_after_store":
            _reset(self.writer)
            return False
        if mode == "half_response":
            # the whole head and half the body: the client sees a Content-Length it never gets
            if response.body:
                cut = (
                    response.interim + response.head.raw + response.body[: len(response.body) // 2]
                )
            else:
                cut = response.data()[: len(response.data()) // 2]
            await self._send(cut)
            return False
        if mode == "stall":
            await self._hold()
            return False
        data = EARLY_HINTS + response.data() if mode == "early_hints" else response.data()
        if mode == "trickle":
            for index in range(len(data)):
                if index:
                    await asyncio.sleep(self.proxy.trickle_interval)
                await self._send(data[index : index + 1])
        else:
            await self._send(data)
        return True

    async def _exchange(self, request: _Head, body: bytes) -> _Response | None:
        """Forward a whole request and read the whole answer (None: upstream closed, no answer)."""
        reader, writer = await self._connect()
        writer.write(request.raw + body)
        await writer.drain()
        self.proxy._bump(forwarded=1)
        async with asyncio.timeout(self.proxy.upstream_timeout):
            interim = b""
            for _ in range(_MAX_INTERIM + 1):
                head = await _read_head(reader)
                if head is None:
                    self._drop_upstream()
                    return None
                if not head.start[1].isdigit():
                    raise _ProtocolError(f"bad status line from upstream {head.start!r}")
                status = int(head.start[1])
                if 100 <= status < 200 and status != 101:
                    interim += head.raw
                    continue
                return await self._read_response_body(reader, request, head, interim)
        raise _ProtocolError("too many 1xx answers from upstream")

    async def _read_response_body(
        self, reader: asyncio.StreamReader, request: _Head, head: _Head, interim: bytes
    ) -> _Response:
        status = int(head.start[1])
        if request.start[0] == "HEAD" or status in (101, 204, 304):
            return _Response(interim, head, b"", complete=True, closes=head.closes())
        if head.fields.get("transfer-encoding"):
            raise _ProtocolError("chunked responses are not supported by the proxy")
        length = head.content_length()
        if length is None:  # framed by the upstream closing the connection
            chunks: list[bytes] = []
            for _ in range(_MAX_BUFFERED // _READ_CHUNK + 1):
                chunk = await reader.read(_READ_CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
            return _Response(interim, head, b"".join(chunks), complete=True, closes=True)
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError as exc:
            return _Response(interim, head, exc.partial, complete=False, closes=True)
        return _Response(interim, head, body, complete=True, closes=head.closes())

    async def _reset_mid_body(self, request: _Head, body: bytes) -> None:
        _, writer = await self._connect()
        # with no body, half the head: the upstream must never get a complete request
        partial = (
            request.raw + body[: len(body) // 2] if body else request.raw[: len(request.raw) // 2]
        )
        writer.write(partial)
        await writer.drain()
        await asyncio.sleep(_SETTLE_BEFORE_RESET)
        _reset(writer)
        self.upstream = None
        _reset(self.writer)

    async def _connect(self) -> _Stream:
        if self.upstream is not None and self.upstream[0].at_eof():
            # the upstream closed this idle connection; nothing was sent on it, so redial
            self._drop_upstream()
        if self.upstream is None:
            async with asyncio.timeout(_CONNECT_TIMEOUT):
                self.upstream = await asyncio.open_connection(
                    _HOST, self.proxy.upstream_port, limit=_HEAD_LIMIT
                )
            self.proxy._bump(upstream_connects=1)
        return self.upstream

    def _drop_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream[1].transport.abort()
            self.upstream = None

    async def _send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def _discard(self, length: int) -> bool:
        remaining = length
        while remaining > 0:  # bounded: each pass consumes at least one byte or returns
            chunk = await self.reader.read(min(remaining, _READ_CHUNK))
            if not chunk:
                return False
            remaining -= len(chunk)
        return True

    async def _hold(self) -> None:
        """Answer nothing; end when the client goes away (EOF) or the proxy stops (cancel)."""
        for _ in range(_MAX_HOLD_READS):
            if not await self.reader.read(_READ_CHUNK):
                return

    async def _blackhole(self) -> None:
        # stop reading from the socket at all: the client's sends back up like a wedged server
        transport = self.writer.transport
        if isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()
        await self.proxy._stopped_event().wait()

    async def close(self) -> None:
        if self.upstream is not None:
            await _close(self.upstream[1])
            self.upstream = None
        await _close(self.writer)

    def abort(self) -> None:
        self._drop_upstream()
        self.writer.transport.abort()


class FaultProxy:
    """A TCP proxy on 127.0.0.1 that injects one fault mode per HTTP request.

    ``upstream`` is ``"127.0.0.1:PORT"``, ``"http://127.0.0.1:PORT"`` or ``("127.0.0.1", PORT)``.
    Requests take the modes of ``script`` in order, then ``mode`` (both changeable at run time
    with :meth:`script_modes` and the ``mode`` property). A ``blackhole`` due next also swallows
    a whole new connection before any request is read. ``trickle_interval``, ``max_body`` and
    ``upstream_timeout`` are plain attributes, read at each use.
    """

    def __init__(
        self,
        upstream: str | tuple[str, int],
        *,
        script: Iterable[Mode] = (),
        mode: Mode = "pass",
        trickle_interval: float = 1.0,
        max_body: int = 1024 * 1024,
        upstream_timeout: float = 10.0,
    ) -> None:
        self.upstream_port: int = _upstream_port(upstream)
        self.trickle_interval: float = trickle_interval
        self.max_body: int = max_body
        self.upstream_timeout: float = upstream_timeout
        self.errors: list[BaseException] = []  # unexpected handler errors: proxy bugs
        # one re-entrant lock guards modes and counters; wait_for() sleeps on it
        self._cond = threading.Condition()
        self._mode: Mode = check_mode(mode)
        self._script: collections.deque[Mode] = collections.deque(check_mode(m) for m in script)
        self._seen = self._forwarded = self._accepted = self._open = self._upstream_connects = 0
        self._modes: collections.Counter[Mode] = collections.Counter()
        self._lifecycle = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        self._port: int | None = None
        self._closed = False
        # loop-thread state, touched only inside the event loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._connections: set[_Connection] = set()

    # ----------------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        """Bind a free port and serve in a daemon thread; returns self."""
        with self._lifecycle:
            if self._closed:
                raise RuntimeError("this proxy is closed")
            if self._thread is not None:
                raise RuntimeError("the proxy is already running")
            self._thread = threading.Thread(target=self._run, name="faultproxy", daemon=True)
            self._thread.start()
        if not self._ready.wait(_START_TIMEOUT) or self._port is None:
            error = self._startup_error
            self.close()
            raise RuntimeError("the fault proxy did not start") from error
        return self

    def close(self) -> None:
        """Stop listening, drop every connection and join the thread (bounded). Idempotent."""
        with self._lifecycle:
            self._closed = True
            thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None:
            with suppress(RuntimeError):  # the loop already finished
                loop.call_soon_threadsafe(stop.set)
        thread.join(_JOIN_TIMEOUT)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.url if self._port is not None else "not started"
        return f"<FaultProxy {where} -> 127.0.0.1:{self.upstream_port} mode={self._mode}>"

    @property
    def port(self) -> int:
        """The listening port (RuntimeError before start())."""
        if self._port is None:
            raise RuntimeError("the fault proxy has not been started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, to give the client instead of the upstream's URL."""
        return f"http://{_HOST}:{self.port}"

    # ----------------------------------------------------------------------- modes

    @property
    def mode(self) -> Mode:
        """The mode for requests once the script is used up."""
        with self._cond:
            return self._mode

    @mode.setter
    def mode(self, mode: Mode) -> None:
        checked = check_mode(mode)
        with self._cond:
            self._mode = checked

    def script_modes(self, modes: Iterable[Mode]) -> None:
        """Replace the script: the next requests take these modes in order, then ``mode``."""
        checked = [check_mode(m) for m in modes]
        with self._cond:
            self._script = collections.deque(checked)

    def pending_modes(self) -> tuple[Mode, ...]:
        """Scripted modes not used yet."""
        with self._cond:
            return tuple(self._script)

    # ----------------------------------------------------------------------- counters

    @property
    def requests_seen(self) -> int:
        """Request heads read from clients (a blackholed new connection reads none)."""
        with self._cond:
            return self._seen

    @property
    def requests_forwarded(self) -> int:
        """Whole requests written upstream (``reset_mid_body`` sends only part: not counted)."""
        with self._cond:
            return self._forwarded

    @property
    def mode_counts(self) -> dict[Mode, int]:
        """How each request was treated; ``too_large`` under the limit counts as ``pass``."""
        with self._cond:
            return {mode: self._modes[mode] for mode in MODES}

    @property
    def open_connections(self) -> int:
        """Client connections open now."""
        with self._cond:
            return self._open

    @property
    def connections_accepted(self) -> int:
        """Client connections accepted so far."""
        with self._cond:
            return self._accepted

    @property
    def upstream_connects(self) -> int:
        """Connections opened to the upstream (one per client connection that forwarded)."""
        with self._cond:
            return self._upstream_connects

    def reset_counters(self) -> None:
        """Zero every counter except ``open_connections``."""
        with self._cond:
            self._seen = self._forwarded = self._accepted = self._upstream_connects = 0
            self._modes.clear()

    def wait_for(self, predicate: Callable[[FaultProxy], bool], timeout: float = 2.0) -> bool:
        """Block until ``predicate(self)`` holds (True) or ``timeout`` seconds pass (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    # ----------------------------------------------------------------------- loop side

    def _take_connection_blackhole(self) -> bool:
        with self._cond:
            upcoming = self._script[0] if self._script else self._mode
            if upcoming != "blackhole":
                return False
            if self._script:
                self._script.popleft()
            self._modes["blackhole"] += 1
            self._cond.notify_all()
            return True

    def _take_request_mode(self) -> Mode:
        with self._cond:
            self._seen += 1
            self._cond.notify_all()
            return self._script.popleft() if self._script else self._mode

    def _record(self, mode: Mode) -> None:
        with self._cond:
            self._modes[mode] += 1
            self._cond.notify_all()

    def _bump(
        self, *, forwarded: int = 0, accepted: int = 0, opened: int = 0, upstream_connects: int = 0
    ) -> None:
        with self._cond:
            self._forwarded += forwarded
            self._accepted += accepted
            self._open += opened
            self._upstream_connects += upstream_connects
            self._cond.notify_all()

    def _stopped_event(self) -> asyncio.Event:
        assert self._stop is not None
        return self._stop

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(loop))
        except BaseException as exc:  # reported by start(); the thread must not die noisily
            self._startup_error = exc
        finally:
            with suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._ready.set()  # start() must not wait out its timeout if binding failed

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        stop = asyncio.Event()
        server = await asyncio.start_server(self._accept, _HOST, 0, limit=_HEAD_LIMIT)
        with self._lifecycle:
            self._loop, self._stop = loop, stop
            closed_already = self._closed
        try:
            self._port = int(server.sockets[0].getsockname()[1])
            self._ready.set()
            if not closed_already:
                await stop.wait()
        finally:
            server.close()
            await self._cancel_connections()
            with suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_TIMEOUT):
                    await server.wait_closed()

    async def _cancel_connections(self) -> None:
        for _ in range(3):  # a cancelled handler's cleanup may meet a just-accepted connection
            tasks = set(self._tasks)
            if not tasks:
                break
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=_CANCEL_TIMEOUT)
        # handlers cancelled before their first step never ran their cleanup
        for connection in list(self._connections):
            self._finish(connection)
        # aborted transports close their sockets in callbacks on the next loop turns
        for _ in range(3):
            await asyncio.sleep(0)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # a plain callback, not a coroutine: start_server's own task wrapper (3.11) logs an
        # error for every handler cancelled at close(); this task is ours to cancel quietly
        connection = _Connection(self, reader, writer)
        self._connections.add(connection)
        self._bump(accepted=1, opened=1)
        task = asyncio.get_running_loop().create_task(self._serve(connection))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _finish(self, connection: _Connection) -> None:
        connection.abort()
        if connection in self._connections:
            self._connections.discard(connection)
            self._bump(opened=-1)

    async def _serve(self, connection: _Connection) -> None:
        graceful = True
        try:
            await connection.run()
        except asyncio.CancelledError:
            graceful = False  # the proxy is stopping: drop everything at once
            raise
        except (OSError, EOFError, TimeoutError, _ProtocolError):
            pass  # a peer went away or spoke nonsense: this connection is over
        except Exception as exc:  # a proxy bug: keep it for the test to see, not the log
            self.errors.append(exc)
        finally:
            try:
                if graceful:
                    await connection.close()
            finally:
                self._finish(connection)
