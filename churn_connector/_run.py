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

from ._core.book import RowBook
from ._core.config import ClientConfig
from ._core.exceptions import Interrupted, RunStopped
from ._core.types import RowState
from ._delivery.chunking import Request, SizeLimit
from ._delivery.prefetch import Handoff
from ._delivery.progress import Progress
from ._delivery.sender import Sender
from ._delivery.transport import DryRunPoster, HttpPoster, Poster
from ._ledger import LedgerArg, LedgerStage, open_ledger, scope_of
from ._read import read_by_caller, row_count
from ._results.result import SendResult
from ._stream import Stream, WireBatch, batches

if TYPE_CHECKING:
    import requests

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
    ) -> None:
        self.config = config
        self.session = session
        self.stream = stream
        self.concurrency = concurrency
        self.dry_run = dry_run
        self.progress = progress
        self.started = time.monotonic()
        self.size_limit = SizeLimit(config.max_request_bytes)  # learned from 413 answers
        self.total: int | None = None  # the input's rows, when known up front

    def deliver(self, requests: RequestsOf, ledger: LedgerArg) -> SendResult:
        """Deliver (with the ledger open if asked) and account for every row."""
        stream, config = self.stream, self.config
        config.check_run(dry_run=self.dry_run, ledger=ledger is not None)
        scope = scope_of(config.base_url, config.api_key)
        scoped, opened = open_ledger(ledger, scope, dry_run=self.dry_run)
        try:
            # the caller's own objects (a cursor, a generator) are read on this thread only
            feed = Handoff(stream.slices()) if read_by_caller(stream.data) else None
            wire = batches(stream, None if feed is None else feed.items())
            stage = None
            if scoped is not None:
                stage = LedgerStage(scoped, stream.kind, stream.failures)
                wire = stage.apply(wire)
            sender = self._send(requests(wire), stage, feed)
        finally:
            if opened is not None:
                opened.close()
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
        )
        log.info("%s", result.summary())
        return result

    def _send(
        self, requests: Iterable[Request], stage: LedgerStage | None, feed: Handoff[Any] | None
    ) -> Sender:
        book = self.stream.book
        enabled = False if self.dry_run else self.progress
        # the input's length, when it is known without reading it
        total = row_count(self.stream.data)
        if total is not None:
            book.reserve(total)
        self.total = total
        bar = Progress(
            self.stream.kind,
            total=None if enabled is False else total,  # a total, and so an ETA
            enabled=enabled,
            done=lambda: _finished(book),
            counts=None if self.dry_run else book.counts,  # how the bar ends
        )
        poster: Poster = (
            DryRunPoster()
            if self.dry_run
            else HttpPoster(
                self.config,
                self.concurrency,
                session=self.session,
                on_retry=bar.retried if bar.takes_retries else None,
            )
        )
        sender = Sender(
            poster,
            book,
            bar,
            # a dry run has nothing to wait for: one worker keeps its chunk numbers in order
            concurrency=1 if self.dry_run else self.concurrency,
            bisect=self.config.bisect_rejected,
            split_budget=self.config.max_split_requests,
            size_limit=self.size_limit,
            on_sent=stage.acknowledged if stage is not None else None,
        )
        stopped = True
        try:
            with sigterm_raises():
                sender.run(requests, feed)
                if stage is not None:
                    stage.finish()  # what the ledger buffered: its failure stops the run too
            stopped = False
        except BaseException as exc:
            if isinstance(exc, Exception) and not isinstance(exc, RunStopped):
                raise  # a bug of ours: shown as it is
            raise self._stopped(exc, sender) from exc
        finally:
            poster.close()
            bar.close(stopped=stopped)
        return sender

    def _stopped(self, exc: BaseException, sender: Sender) -> RunStopped:
        """The error a stopped run raises: every row accounted for, the frames attached."""
        book = self.stream.book
        reason = (
            f"the run stopped ({exc.message})" if isinstance(exc, RunStopped) else "interrupted"
        )
        pending = np.flatnonzero(book.status == RowState.PENDING)
        book.set(pending, RowState.FAILED, error=f"not sent: {reason}")
        elapsed = time.monotonic() - self.started
        partial = SendResult(
            self.stream.kind,
            book,
            sender.chunks,
            elapsed,
            wire_paths=self.stream.wire_paths,
            fingerprint=self.stream.fingerprinter.result(),
            complete=False,  # a re-send also sends the rows it never read
        )
        counts = dict(partial.counts)
        if isinstance(exc, RunStopped):
            return exc.with_results(counts, partial.rows, partial.chunks)
        # Ctrl-C, SIGTERM, or whatever an orchestrator raises when it kills the task
        summary = f"interrupted: {counts['sent']:,} of {len(book):,} rows delivered"
        if self.total is not None and self.total > len(book):  # the rest was never read
            summary = (
                f"interrupted: {counts['sent']:,} of {self.total:,} rows delivered "
                f"({len(book):,} read, {self.total - len(book):,} never read)"
            )
        # the exception carries the summary and whoever catches it shows it (the CLI prints
        # it); logged as a warning too, it printed twice, in a notebook as red stderr
        log.info("%s", summary)
        return Interrupted(
            summary, signal=signal_of(exc), counts=counts, rows=partial.rows, chunks=partial.chunks
        )


def _finished(book: RowBook) -> int:
    """Rows with their final state: progress counts rows (invalid and skipped ones too)."""
    status = book.status
    return len(status) - int(np.count_nonzero(status == RowState.PENDING))


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
