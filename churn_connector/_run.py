"""One send: the stream, the optional ledger stage, the sender over a Poster, and the
SendResult that accounts for every row (what ``Client.send_events`` / ``identify`` run).

The caller's own objects (a generator, a cursor) are read on the calling thread through a
``Handoff``; the stream is validated and wired on the build thread (``prefetch``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from ._core import ClientConfig, InputError, Interrupted, RowState, RunStopped
from ._delivery import (
    DryRunPoster,
    Handoff,
    HttpPoster,
    Poster,
    Progress,
    Request,
    Sender,
    SharedBudget,
    SizeLimit,
    ledger_budget,
)
from ._ledger import Guard, LedgerArg, LedgerStage, open_ledger, scope_of
from ._notebook import short_interrupts
from ._read import query_of, read_by_caller, row_count, unread_labels
from ._results import SendResult
from ._slices import Stream, batches
from ._wire import WireBatch

if TYPE_CHECKING:
    import requests

__all__ = [
    "Run",
    "Terminated",
    "signal_of",
    "sigterm_raises",
]

log = logging.getLogger("churn_connector")

# turns wire batches into requests: chunks of events, or one identify per user
RequestsOf = Callable[[Iterable[WireBatch]], Iterator[Request]]


class Run:
    """One send: the stream, the optional ledger stage, the sender, and the accounting."""

    def __init__(
        self,
        config: ClientConfig,
        stream: Stream,
        concurrency: int,
        *,
        dry_run: bool,
        progress: bool | None,
        session: requests.Session | None = None,
        ahead: int = 0,
    ) -> None:
        self.config = config
        self.ahead = ahead  # requests built ahead beyond the sender's rounds (``Sender``)
        self.session = session
        self.stream = stream
        self.concurrency = concurrency
        self.dry_run = dry_run
        self.progress = progress
        self.started = time.monotonic()
        self.size_limit = SizeLimit(config.max_request_bytes)  # learned from 413 answers
        self.total: int | None = None  # the input's rows, when known up front
        self.budget: SharedBudget | None = None  # budget="ledger": the ledger's database's

    def deliver(
        self, requests: RequestsOf, ledger: LedgerArg, *, guard: Guard | None = None
    ) -> SendResult:
        """Deliver (with the ledger open if asked) and account for every row, also when the
        run stops: an error raises a ``RunStopped``, an interrupt or SIGTERM at any point
        from here on an ``Interrupted``, either carrying the accounting (every row ``failed``
        "not sent" that was not delivered, and the rows never read too, where the input's
        length is known).
        ``guard``: the events' re-id guard, when a ledger is open."""
        stream, config = self.stream, self.config
        sender: Sender | None = None
        try:
            with sigterm_raises():
                # the input's length, when it is known without reading it
                self.total = row_count(stream.data)
                config.check_run(dry_run=self.dry_run, ledger=ledger is not None)
                scope = scope_of(config.base_url, config.api_key)
                scoped, opened = open_ledger(ledger, scope, dry_run=self.dry_run)
                if config.budget == "ledger" and not self.dry_run:
                    self.budget = ledger_budget(config, None if scoped is None else scoped.ledger)
                if scoped is not None and config.deadline is not None:
                    # a ledger that stops answering ends the run near its deadline too
                    scoped.ledger.bound_by(self.started + config.deadline)
                try:
                    # the caller's own objects (a cursor, a generator) are read on this
                    # thread only
                    feed = Handoff(stream.slices()) if read_by_caller(stream.data) else None
                    wire = batches(stream, None if feed is None else feed.items())
                    stage = None
                    if scoped is not None:
                        if guard is not None:
                            stream.natural_keys = True  # batches carry them from now on
                        stage = LedgerStage(scoped, stream.kind, stream.failures, guard)
                        wire = stage.apply(wire)
                    sender = self._sender(stage)
                    self._send(sender, requests(wire), feed, stage)
                finally:
                    if scoped is not None:
                        scoped.end()  # no read of the input's reader left under way
                        scoped.ledger.bound_by(None)  # a ledger of the caller's outlives it
                    if opened is not None:
                        opened.close()
        except BaseException as exc:
            if isinstance(exc, Exception) and not isinstance(exc, RunStopped):
                raise  # a bug of ours, or a configuration error: shown as it is
            raise self._stopped(exc, sender) from exc
        pending = len(stream.book) - stream.book.finished()
        if not self.dry_run and (pending or not sender.read_to_end):  # the deadline passed
            self._unread("deadline exceeded", read_to_end=sender.read_to_end)
        elapsed = time.monotonic() - self.started
        kind, book, notes = stream.kind, stream.book, stream.notes()
        result = SendResult(
            kind,
            book,
            sender.chunks,
            elapsed,
            dry_run=self.dry_run,
            notes=notes,
            wire_paths=stream.wire_paths,
            fingerprint=stream.fingerprinter.result(),
            complete=sender.read_to_end,  # the deadline may have cut the reading short
        )
        log.info("%s", result.summary())
        return result

    def _sender(self, stage: LedgerStage | None) -> Sender:
        book = self.stream.book
        if self.total is not None:
            self.stream.reserve(self.total)
        else:
            query = query_of(self.stream.data)
            expected = query.estimated_rows() if query is not None else None
            if expected is not None and expected > 0:
                self.stream.expect(expected)
        enabled = False if self.dry_run else self.progress
        self.bar = Progress(
            self.stream.kind,
            total=None if enabled is False else self.total,  # a total, and so an ETA
            enabled=enabled,
            done=book.finished,  # rows with their final state (invalid, skipped too)
            counts=None if self.dry_run else book.counts,  # how the bar ends
        )
        bar = self.bar
        poster: Poster = (
            DryRunPoster()
            if self.dry_run
            else HttpPoster(
                self.config,
                self.concurrency,
                session=self.session,
                on_retry=bar.retried if bar.takes_retries else None,
                budget=self.budget,
            )
        )
        deadline = self.config.deadline
        return Sender(
            poster,
            book,
            bar,
            # a dry run has nothing to wait for: one worker keeps its chunk numbers in order
            concurrency=1 if self.dry_run else self.concurrency,
            bisect=self.config.bisect_rejected,
            split_budget=self.config.max_split_requests,
            size_limit=self.size_limit,
            on_sent=stage.acknowledged if stage is not None else None,
            deadline=None if self.dry_run or deadline is None else self.started + deadline,
            ahead=self.ahead,
        )

    def _send(
        self,
        sender: Sender,
        requests: Iterable[Request],
        feed: Handoff[Any] | None,
        stage: LedgerStage | None,
    ) -> None:
        stopped = True
        try:
            sender.run(requests, feed)
            if stage is not None:
                stage.finish()  # what the ledger buffered: its failure stops the run too
            stopped = False
        finally:
            if stopped and stage is not None:
                stage.settle()
            sender.poster.close()
            self.bar.close(stopped=stopped)

    def _unread(self, reason: str, *, read_to_end: bool = False) -> int:
        """Account for what was not delivered when the run stopped: pending rows ``failed``
        "not sent: <reason>"; unless the input was read to its end, the rows never read too
        where the input's length is known, else the book says where reading stopped.
        Returns how many rows were read."""
        book = self.stream.book
        book.close()  # whoever is still reading the input adds nothing from now on
        read = len(book)
        error = f"not sent: {reason}"
        book.set(np.flatnonzero(book.status == RowState.PENDING), RowState.FAILED, error=error)
        if read_to_end:
            return read
        rest = None if self.total is None else unread_labels(self.stream.data, read)
        if rest is not None and len(rest) == self.total - read:  # type: ignore[operator]
            if len(rest):
                start = book.extend(rest)
                book.set(np.arange(start, len(book)), RowState.FAILED, error=error)
        else:
            where = f"no row after row {book.labels[read - 1]}" if read else "no row"
            book.not_read = f"the input was not read to the end: {where} was read"
        return read

    def _stopped(self, exc: BaseException, sender: Sender | None) -> RunStopped | Interrupted:
        """The error a stopped run raises: every row accounted for, the frames attached."""
        book = self.stream.book
        reason = (
            f"the run stopped ({exc.message})"
            if isinstance(exc, RunStopped | Interrupted)
            else "interrupted"
        )
        read = self._unread(reason)
        elapsed = time.monotonic() - self.started
        chunks = [] if sender is None else sender.chunks
        partial = SendResult(
            self.stream.kind,
            book,
            chunks,
            elapsed,
            wire_paths=self.stream.wire_paths,
            fingerprint=self.stream.fingerprinter.result(),
            complete=False,  # a re-send also sends the rows it never read
        )
        counts = dict(partial.counts)
        if isinstance(exc, RunStopped | Interrupted):
            message = exc.message
            # a reading error says itself after how many rows the input broke
            if book.not_read is not None and not isinstance(exc, InputError):
                message = f"{message} {_sentence(book.not_read)}"
            stopped = exc.with_results(counts, partial.rows, partial.chunks)
            stopped.not_read = book.not_read
            if message != exc.message:
                stopped.message = message
                stopped.args = (message,)
            return stopped
        # Ctrl-C, SIGTERM, or whatever an orchestrator raises when it kills the task
        # delivered: sent, or skipped as already delivered, as the progress bar fills it
        delivered = counts["sent"] + counts["skipped"]
        how = []
        if counts["skipped"]:
            how.append(
                f"{counts['sent']:,} sent, {counts['skipped']:,} skipped as already delivered"
            )
        summary = f"interrupted: {delivered:,} of {len(book):,} rows delivered"
        if book.not_read is not None:
            summary = f"interrupted: {delivered:,} of the {len(book):,} rows read delivered"
        elif read < len(book):  # the length is known: the rest was never read
            how.append(f"{read:,} read, {len(book) - read:,} never read")
        if how:
            summary += f" ({'; '.join(how)})"
        if book.not_read is not None:
            summary += f"; {book.not_read}"
        # the exception carries the summary and whoever catches it shows it (the CLI prints
        # it); logged as a warning too, it printed twice, in a notebook as red stderr
        log.info("%s", summary)
        interrupted = Interrupted(
            summary, signal=signal_of(exc), counts=counts, rows=partial.rows, chunks=partial.chunks
        )
        short_interrupts(Interrupted)  # in IPython: one line, the traceback kept for %tb
        interrupted.not_read = book.not_read
        return interrupted


def _sentence(text: str) -> str:
    """``text`` as a sentence of its own: capitalised, with a full stop."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


# ------------------------------------------------------------------------------------------
# SIGTERM ends a send the way Ctrl-C does: an exception in the main thread while it waits.


class Terminated(BaseException):
    """SIGTERM arrived while a send was running."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received signal {signum}")
        self.signum = signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (main thread, default handler only).

    An orchestrator's own handler is left alone: the exception it raises while the send
    waits stops the run the same way.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def signal_of(exc: BaseException) -> int | None:
    """The signal behind an interrupt, when one is known."""
    if isinstance(exc, Terminated):
        return exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return int(signal.SIGINT)
    return None
