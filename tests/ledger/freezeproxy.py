"""A TCP proxy whose sessions can be frozen: after ``freeze()`` it forwards nothing in either
direction, yet keeps every connection open and its kernel acknowledging what arrives, as a
stalled firewall, a hung server or a paused VM looks to a client (no reset, no close; TCP
keepalives are answered). For the ledger's PostgreSQL tests."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

__all__ = ["FreezeProxy"]


class FreezeProxy:
    """Listens on 127.0.0.1 (``port``) and forwards each connection to ``upstream_port``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        """From now on nothing passes, and nothing is closed."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
                self.connections += 1
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            self._flowing.wait()  # frozen: read nothing more (the kernel still acks)
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            while not self._flowing.is_set():
                if self._stopped.wait(0.05):
                    return
            try:
                sink.sendall(data)
            except OSError:
                break
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stopped.set()
        self._flowing.set()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
