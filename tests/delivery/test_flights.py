"""An abort reaches only the attempt it was meant for: once a flight has finished (its
connection handed back to the pool for another request), neither the watchdog nor an
interrupt may end what it held. Real sockets (a connected pair)."""

from __future__ import annotations

import socket
import time

from churn_connector._delivery.pool import Abort, Flights


def _alive(a: socket.socket, b: socket.socket) -> bool:
    a.sendall(b"ping")
    b.settimeout(1.0)
    return b.recv(4) == b"ping"


def test_an_abort_after_a_flight_finished_leaves_its_connection_alone() -> None:
    flights = Flights()
    a, b = socket.socketpair()
    with a, b:
        with flights.flying(Abort(60.0, "request timeout")) as flight:
            flight.hold(a)
        # the flight is over; the connection now serves another request
        flight.abort("interrupted")
        flights.abort_all("interrupted")
        assert flight.aborted is None
        assert _alive(a, b)
    flights.close()


def test_the_watchdog_ends_a_late_flight_in_any_phase_and_says_why() -> None:
    flights = Flights()
    a, b = socket.socketpair()
    with a, b:
        with flights.flying(Abort(0.2, "request timeout")) as flight:
            flight.hold(a)
            a.settimeout(5.0)
            started = time.monotonic()
            assert a.recv(1) == b""  # woken by the shutdown, not by the 5 s timeout
            assert time.monotonic() - started < 2.0
        assert flight.aborted == "request timeout"
    flights.close()


def test_a_flight_aborted_before_its_socket_exists_ends_that_socket_at_once() -> None:
    # the deadline fired during DNS: the socket made next is shut as it is handed over
    flights = Flights()
    a, b = socket.socketpair()
    with a, b:
        with flights.flying(Abort(60.0, "request timeout")) as flight:
            flights.abort_all("interrupted")
            flight.hold(a)
            a.settimeout(5.0)
            assert a.recv(1) == b""
        assert flight.aborted == "interrupted"
    flights.close()
