"""One run of a sync: its watermark read before the input is, the read narrowed, the slices
tapped, and the watermark moved after the run only as far as ``settle`` allows.

The watermark is written once, after the run, in one record: a run killed at any moment
(``kill -9`` included) leaves the watermark of the run before it, so the next run reads
again what this one read (the ledger skips what it delivered). A run that stopped (an
error, Ctrl-C, SIGTERM) moves it as far as its settled rows allow, then raises as before.
A dry run reads the watermark and writes nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._core import (
    ClientConfig,
    ConfigurationError,
    Interrupted,
    Kind,
    LedgerError,
    RunStopped,
    named,
)
from .._delivery import SendOptions
from .._ledger import Ledger, LedgerArg, ScopedLedger, scheme_of, scope_of
from .._read import ReadSpec, query_of
from .._results import SendResult
from .._slices import Stream
from .options import SyncOptions
from .plan import Plan, plan_for, source_name
from .record import (
    FILES_KIND,
    SYNC_KIND,
    Watermark,
    file_key,
    file_keys,
    known_files,
    read_watermark,
)
from .settle import settled_files, unsettled, watermark_after

__all__ = ["Sync"]

log = logging.getLogger("churn_connector")


class Sync:
    """A send's sync (see the module); without sync options, a pass-through."""

    def __init__(self, data: Any, ledger: LedgerArg) -> None:
        self.data = data  # what the stream reads
        self.ledger = ledger  # what the run's ledger stage gets
        self.plan: Plan | None = None
        self.name = ""
        self.mark: Watermark | None = None
        self.options = SyncOptions()
        self._scoped: ScopedLedger | None = None
        self._opened: Ledger | None = None
        self.report: dict[str, Any] | None = None

    @classmethod
    def open(
        cls,
        data: Any,
        options: SyncOptions,
        kind: Kind,
        reading: ReadSpec,
        send: SendOptions,
        config: ClientConfig,
    ) -> Sync:
        """Read the sync's watermark and narrow the read (see the module); closed as a
        context manager."""
        ledger, dry_run = send.ledger, send.dry_run
        sync = cls(data, ledger)
        if not options.active:
            return sync
        sync.options = options
        given = reading.at.given()
        if given:
            raise ConfigurationError(
                f"{', '.join(named(n) for n in given)}: an incremental sync reads the table's "
                "current version, from where the last run stopped (drop the option)"
            )
        name = options.sync_name or source_name(data, kind, options.cursor)
        if name is None and not options.ranged:
            raise ConfigurationError(
                f"an incremental sync of a {type(data).__name__}: such a table has no name of "
                f"its own for its watermark: name the sync ({named('sync_name')})"
            )
        name = name or "backfill"  # a range read moves no watermark: it needs no name
        sync.name = name
        if ledger is None and not options.ranged:
            raise ConfigurationError(
                f"{named('cursor') if options.cursor else named('incremental')}: a sync keeps "
                f"its watermark in the ledger: pass {named('ledger')} (or bound a backfill "
                f"with {named('since')} / {named('until')})"
            )
        if ledger is not None:
            config.check_run(dry_run=dry_run, ledger=True)
            sync._open_ledger(ledger, scope_of(config.base_url, config.api_key), dry_run=dry_run)
        scoped = sync._scoped
        if scoped is not None and not options.ranged and not options.full_refresh:
            sync.mark = read_watermark(scoped, name)

        def files(names: list[str]) -> dict[str, str]:
            if scoped is None or options.full_refresh:
                return {}
            return known_files(scoped, name, names)

        sync.plan = plan_for(
            data, options, kind=kind, reading=reading, mark=sync.mark, known_files=files
        )
        sync.data = sync.plan.data
        if options.full_refresh and scoped is not None:
            # a folder's files are read again from the first: their records go now
            old = read_watermark(scoped, name)
            if old is not None and old.by == "files":
                scoped.forget(FILES_KIND, file_keys(scoped.ledger, scoped.scope, name))
        return sync

    def _open_ledger(self, ledger: LedgerArg, scope: str, *, dry_run: bool) -> None:
        if isinstance(ledger, Ledger):
            self._scoped = ScopedLedger(ledger, scope, writable=not dry_run)
            return
        assert ledger is not None
        if dry_run and scheme_of(ledger) is None and not Path(os.fspath(ledger)).exists():
            return  # nothing recorded yet, and a dry run creates nothing
        self._opened = Ledger(ledger, read_only=dry_run)
        self._scoped = ScopedLedger(self._opened, scope, writable=not dry_run)
        self.ledger = self._opened  # the run shares it (and leaves it open: closed here)

    def __enter__(self) -> Sync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.plan is not None:
            self.plan.tap.close()
        if self._opened is not None:
            self._opened.close()
            self._opened = None

    def deliver(self, stream: Stream, run: Callable[[LedgerArg], SendResult]) -> SendResult:
        """Run the send over ``stream`` (tapped), then settle the watermark."""
        if self.plan is None:
            return run(self.ledger)
        stream.tap = self.plan.tap
        try:
            result = run(self.ledger)
        except (RunStopped, Interrupted):
            try:
                self.settle(stream)
            except LedgerError as exc:  # what stopped the run is what the caller hears of
                log.warning("sync %s: the watermark was left as it was (%s)", self.name, exc)
            raise
        self.settle(stream)
        result.fingerprint["sync"] = self.report
        return result

    def settle(self, stream: Stream) -> None:
        """Move the watermark as far as the run's rows allow (``settle``), and say so."""
        plan = self.plan
        assert plan is not None
        book, tap, old = stream.book, plan.tap, self.mark
        scoped = self._scoped
        writable = scoped is not None and scoped.writable and not self.options.ranged
        source = _source_of(stream)
        before = old.shown if old is not None else "none"
        new: Watermark | None = old
        if plan.by == "cursor":
            value = watermark_after(
                book,
                tap,
                lower=plan.lower,
                old=old.value if old is not None else None,
                ordered=plan.ordered,
            )
            if value is not None:
                new = Watermark(self.name, "cursor", source, cursor=plan.cursor, value=value)
            elif self.options.full_refresh:
                new = None
        elif plan.by in ("versions", "snapshots"):
            if not unsettled(book, tap):
                new = Watermark(self.name, plan.by, source, position=plan.position)
            elif self.options.full_refresh:
                new = None
        else:
            done = settled_files(book, tap)
            if tap.finished:  # files of no rows at all: read through too
                seen = {name for name, _, _ in tap.files or ()}
                done += [name for name in plan.files if name not in seen]
            if writable and done:
                assert scoped is not None
                scoped.record_now(
                    FILES_KIND, [(file_key(self.name, f), plan.files[f]) for f in done]
                )
            count = (old.files or 0) if old is not None and not self.options.full_refresh else 0
            new = Watermark(self.name, "files", source, files=count + len(done))
        after = new.shown if new is not None else "none"
        moved = (new.text() if new else None) != (old.text() if old else None)
        if writable and moved:
            assert scoped is not None
            if new is None:
                scoped.forget(SYNC_KIND, [self.name])
            else:
                scoped.record_now(SYNC_KIND, [(self.name, new.text())])
        self.report = {
            "name": self.name,
            "by": plan.by,
            **({"cursor": plan.cursor} if plan.cursor else {}),
            "read": plan.read,
            "pushed": plan.pushed,
            "watermark_before": before,
            "watermark_after": after,
            "moved": bool(moved and writable),
        }
        if not self.options.ranged:
            verb = "moved" if moved and writable else "would move" if moved else "stays"
            log.info("sync %s: watermark %s %s -> %s", self.name, verb, before, after)


def _source_of(stream: Stream) -> str:
    """The input, as ``ledger syncs`` names it."""
    source = stream.fingerprinter.source
    if source.kind == "query":
        query = query_of(stream.data)
        return query.described if query is not None else "a query"
    return f"{source.kind} {source.path}" if source.path else source.kind
