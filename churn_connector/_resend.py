"""Re-sending what a run left undelivered: ``cc.resend(rows, data)`` and ``churn-connector
resend ROWS DATA``.

The rows file (``--rows``, ``SendResult.rows``) says each row's state and records the
input's fingerprint (``_results.runs``). A re-send reads the same input again, refuses it
unless its fingerprint is the recorded one (a changed file would shift rows, and the
re-send would send the wrong ones), selects the rows by position, checks their labels and
message ids against the rows file, and sends exactly those: every ``failed`` row (``rejected``
ones too with ``include_rejected``), and, after a run that stopped part way, the rows it
never read. Their message ids are the first run's, so a row that did arrive after all is a
duplicate the API drops.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._client import Client, send_keywords
from ._core import (
    STATE_NAMES,
    ClientConfig,
    ConfigurationError,
    DataSource,
    InputError,
    Interrupted,
    Kind,
    RunStopped,
    Secret,
    as_secret,
    on_command_line,
    options_of,
)
from ._delivery import SendOptions
from ._events import EventStream
from ._identities import IdentityStream
from ._options import EventOptions, IdentityOptions
from ._read import DEFAULT_TEXT, Fingerprinter, Slice, table_format
from ._results import HEADER, ROWS_FORMAT, SendResult, header_of, read_rows_file, stored_header
from ._slices import batches

if TYPE_CHECKING:
    import requests

__all__ = ["Resend", "merged_rows", "plan_resend", "resend", "send_plan"]

_WHOLE_AGAIN = (
    "send the whole input again instead: message ids make the rows that were delivered "
    "duplicates the API drops (with a ledger, they are skipped)"
)


@dataclasses.dataclass
class Resend:
    """What a re-send selected: the rows file, its header, and the positions to send."""

    recorded: pd.DataFrame  # the rows file, one row per input row read, in order
    header: dict[str, Any]
    positions: np.ndarray  # positions in the input of the rows to send
    frames: list[pd.DataFrame]  # those rows, read again, with their labels
    total: int  # rows the input holds


def resend(
    rows: str | os.PathLike[str] | pd.DataFrame,
    data: DataSource,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    *,
    config: ClientConfig | None = None,
    session: requests.Session | None = None,
    include_rejected: bool = False,
    **options: Any,
) -> SendResult:
    """Re-send the rows a previous send left ``failed`` (and ``rejected`` ones with
    ``include_rejected``) from the same input, with the same message ids.

    ``rows``: the rows file that send wrote (``--rows``, ``.parquet`` or ``.csv``), or its
    frame (``SendResult.rows``, ``RunStopped.rows``). ``data``: the same input. ``options``:
    the keywords of the send (:meth:`Client.send_events` / :meth:`Client.identify`, by the
    rows file's kind), the same as the first time where they shape the rows or their ids
    (``rename``, ``namespace``, ``id_columns``, ...). Raises :class:`InputError` when the
    input no longer matches the rows file (its fingerprint), when the rows file records
    none (written before this version), or when a row's label or message id differs.
    The result accounts for the re-sent rows (labelled as in the input); after a run that
    stopped part way, the rows it never read are sent too. :func:`merged_rows` gives the
    whole input's rows frame with the re-sent rows' new states.
    """
    plan = plan_resend(rows, data, include_rejected=include_rejected, **options)
    client = Client(base_url, as_secret(api_key), config=config, session=session)
    return send_plan(plan, client, **options)


def send_plan(plan: Resend, client: Client, **options: Any) -> SendResult:
    """Send the rows a plan selected; the result's receipt names the first run's input."""
    kind: Kind = plan.header["kind"]
    send = client.send_events if kind == "events" else client.identify
    try:
        result = send(plan.frames, **_send_keywords(kind, options))
    except (RunStopped, Interrupted) as exc:
        if exc.rows is not None:
            exc.rows.attrs[HEADER] = {**exc.rows.attrs.get(HEADER, {}), **_subset(plan)}
        raise
    result.fingerprint = dict(plan.header["input"])
    result.subset = True
    return result


def plan_resend(
    rows: str | os.PathLike[str] | pd.DataFrame,
    data: DataSource,
    *,
    include_rejected: bool = False,
    **options: Any,
) -> Resend:
    """Read the rows file and the input, check they belong together, select the rows."""
    if isinstance(rows, pd.DataFrame):
        recorded, header = rows.reset_index(), header_of(rows)
        where = "the rows frame"
    else:
        _refuse_swapped(rows, data)
        recorded, header = read_rows_file(rows)
        where = os.fspath(rows)
    header = _checked_header(header, where)
    kind: Kind = header["kind"]
    recorded_version = _recorded_version(header["input"], data, options)
    table = _table_options(kind, {**recorded_version, **options})
    stream: EventStream | IdentityStream = (
        EventStream(data, table) if isinstance(table, EventOptions) else IdentityStream(data, table)
    )
    fingerprint = header["input"]
    upto = None if header["complete"] or fingerprint["kind"] != "table" else fingerprint["rows"]
    found = Fingerprinter(stream.data, table.text, upto=upto)
    status = recorded["status"].astype(str).to_numpy()
    states = ["failed", "rejected"] if include_rejected else ["failed"]
    chosen = np.flatnonzero(np.isin(status, states))
    frames = list(
        _selected(stream.slices(), found, chosen, len(recorded), complete=header["complete"])
    )
    _same_input(fingerprint, found.result(), len(recorded), where)
    positions = np.concatenate(
        [chosen, np.arange(len(recorded), found.rows)] if not header["complete"] else [chosen]
    ).astype(np.int64)
    _same_labels(recorded, positions, frames, where)
    plan = Resend(recorded, header, positions, frames, found.rows)
    if kind == "events":
        _same_ids(plan, table, where)
    return plan


def _refuse_swapped(rows: str | os.PathLike[str], data: DataSource) -> None:
    """The input given where the rows file goes, and the rows file as the input: said so,
    before the input is read as a rows file (a large one, wholly)."""
    if not isinstance(data, str | os.PathLike) or stored_header(data) is None:
        return
    if stored_header(rows) is not None:
        return  # both are rows files: the input's fingerprint check says which is wrong
    first, second = os.fspath(rows), os.fspath(data)
    if on_command_line():
        fix = f"churn-connector resend {shlex.quote(second)} {shlex.quote(first)}"
    else:
        fix = f"resend({second!r}, {first!r})"
    raise ConfigurationError(
        f"the rows file and the input are swapped: {second} is the rows file a send wrote "
        f"(--rows) and {first} is not; the rows file comes first: {fix}"
    )


def _recorded_version(
    fingerprint: dict[str, Any], data: DataSource, options: dict[str, Any]
) -> dict[str, Any]:
    """The version of a Delta or Iceberg table the first run read, unless the caller names
    one: a re-send reads the rows that run read, whatever was committed since."""
    named = ("version", "as_of", "snapshot_id")
    if table_format(data) is None or any(options.get(n) is not None for n in named):
        return {}
    if fingerprint.get("kind") == "delta" and fingerprint.get("version") is not None:
        return {"version": fingerprint["version"]}
    if fingerprint.get("kind") == "iceberg" and fingerprint.get("snapshot_id") is not None:
        return {"snapshot_id": fingerprint["snapshot_id"]}
    return {}


def _checked_header(header: dict[str, Any] | None, where: str) -> dict[str, Any]:
    if header is None or header.get("format") != ROWS_FORMAT:
        raise InputError(
            f"{where} records no fingerprint of its input (a rows file written before "
            "churn-connector 0.2, or not by --rows / SendResult.rows): a re-send cannot check "
            f"that the input is the same; {_WHOLE_AGAIN}",
            path=where,
        )
    if header.get("subset"):
        raise InputError(
            f"{where} holds the rows of a re-send, not every row of the input: pass the rows "
            "file that `churn-connector resend --rows` wrote (or merged_rows(plan, result.rows))",
            path=where,
        )
    if header.get("dry_run"):
        raise InputError(
            f"{where} is the rows file of a dry run: nothing was sent; send the input", path=where
        )
    if header.get("kind") not in ("events", "identities"):
        raise InputError(f"{where}: its header names no kind of table", path=where)
    if header["input"].get("sha256") is None:
        raise InputError(
            f"{where}: the first run could not fingerprint its input (it could not be read "
            f"again); {_WHOLE_AGAIN}",
            path=where,
        )
    return header


def _table_options(kind: Kind, options: dict[str, Any]) -> EventOptions | IdentityOptions:
    table = EventOptions if kind == "events" else IdentityOptions
    names = {o.name for o in send_keywords(kind)}  # by kind: batch_size is events
    if unknown := sorted(set(options) - names - {"options"}):
        raise ConfigurationError(f"resend: unknown option(s) {unknown} for {kind}")
    return table.given(options)


def _selected(
    slices: Iterator[Slice],
    found: Fingerprinter,
    chosen: np.ndarray,
    recorded: int,
    *,
    complete: bool,
) -> Iterator[pd.DataFrame]:
    """The chosen rows (and, after a stopped run, those past the recorded ones) of each
    slice, with their labels; every slice is fingerprinted on the way."""
    start = 0
    for part in slices:
        df = part.frame
        found.add(df)
        n = len(df)
        lo, hi = np.searchsorted(chosen, [start, start + n])
        local = chosen[lo:hi] - start
        if not complete and start + n > recorded:
            local = np.concatenate([local, np.arange(max(recorded - start, 0), n)])
        if len(local):
            yield df.iloc[local]
        start += n


def _same_input(recorded: dict[str, Any], now: dict[str, Any], rows: int, where: str) -> None:
    same = (
        recorded.get("kind") == now["kind"]
        and recorded.get("sha256") == now["sha256"]
        and recorded.get("size") == now["size"]
    )
    if same and recorded.get("rows") != rows:
        raise InputError(
            f"{where} holds {rows:,} rows but records {recorded.get('rows'):,} read: it is cut "
            "or edited",
            path=where,
        )
    if not same:
        raise InputError(
            f"the input no longer matches {where}: the rows file was written for "
            f"{_described(recorded)}, the input is {_described(now)}. A re-send selects rows "
            f"by their place in the input, so it would send the wrong ones; {_WHOLE_AGAIN}",
            path=where,
        )


def _described(fingerprint: dict[str, Any]) -> str:
    kind = fingerprint.get("kind")
    if kind == "delta":
        return f"the Delta table {fingerprint.get('table')} at version {fingerprint.get('version')}"
    if kind == "iceberg":
        at = fingerprint.get("snapshot_id")
        return f"the Iceberg table {fingerprint.get('table')} at snapshot {at}"
    size = fingerprint.get("size")
    sized = f" of {size:,} bytes" if isinstance(size, int) else ""
    digest = str(fingerprint.get("sha256"))[:12]
    return f"a {kind}{sized} with sha256 {digest}…"


def _same_labels(
    recorded: pd.DataFrame, positions: np.ndarray, frames: list[pd.DataFrame], where: str
) -> None:
    labels = [str(v) for f in frames for v in f.index.tolist()]
    inside = positions < len(recorded)
    expected = recorded["row"].iloc[positions[inside]].astype(str).tolist()
    for got, want, at in zip(labels, expected, positions[inside].tolist(), strict=False):
        if got != want:
            raise InputError(
                f"the input's row {at} is labelled {got!r}, but {where} says {want!r}: not "
                f"the same input; {_WHOLE_AGAIN}",
                path=where,
            )


def _same_ids(plan: Resend, table: EventOptions | IdentityOptions, where: str) -> None:
    """The re-sent events must carry the ids the rows file records (the same options)."""
    inside = plan.positions < len(plan.recorded)
    if not inside.any():
        return
    neutral = _as_read(table)
    assert isinstance(neutral, EventOptions)
    stream = EventStream(plan.frames, neutral)
    for _ in batches(stream):
        pass
    ids = stream.book.message_ids(0, int(inside.sum()))
    recorded = plan.recorded["message_id"].iloc[plan.positions[inside]].tolist()
    for new, old, at in zip(ids, recorded, plan.positions[inside].tolist(), strict=True):
        if new is not None and isinstance(old, str) and old and new != old:
            raise InputError(
                f"row {plan.recorded['row'].iloc[at]} would be re-sent with message id {new}, "
                f"but {where} records {old}: give the same id options as the first send "
                "(namespace, id_columns, id_format) and the same reading options",
                path=where,
            )


def _as_read(table: EventOptions | IdentityOptions) -> EventOptions | IdentityOptions:
    """The options for rows already read: renames, types, layout and styles applied."""
    neutral: dict[str, Any] = {
        "rename": None,
        "rename_style": None,
        "dtypes": None,
        "encoding": "utf-8",
        "text": DEFAULT_TEXT,
        # a table's version picked the rows; what was read of it has none
        "version": None,
        "as_of": None,
        "snapshot_id": None,
    }
    if isinstance(table, EventOptions):
        neutral["event_type_style"] = None
    return dataclasses.replace(table, **neutral)


def _send_keywords(kind: Kind, options: dict[str, Any]) -> dict[str, Any]:
    table = _table_options(kind, options)
    sends = {o.name for o in options_of(SendOptions)}
    return {
        "options": _as_read(table),
        **{k: v for k, v in options.items() if k in sends},
    }


def _subset(plan: Resend) -> dict[str, Any]:
    return {"input": dict(plan.header["input"]), "subset": True}


def merged_rows(plan: Resend, resent: pd.DataFrame) -> pd.DataFrame:
    """The whole input's rows frame after a re-send: the recorded rows, the re-sent ones
    (``resent``: the re-send's ``result.rows``) with their new state, message id, chunk and
    error, and, after a run that stopped part way, the rows it never read."""
    recorded, positions = plan.recorded, plan.positions
    inside = int((positions < len(recorded)).sum())
    columns = {
        name: recorded[name].astype(object).where(recorded[name].notna(), None).to_numpy().copy()
        for name in ("status", "message_id", "chunk", "error")
    }
    new = {
        name: resent[name].astype(object).where(resent[name].notna(), None).to_numpy()
        for name in columns
    }
    for name, values in columns.items():
        values[positions[:inside]] = new[name][:inside]
    labels = [*recorded["row"].tolist(), *resent.index[inside:].tolist()]
    frame = pd.DataFrame(
        {
            "status": pd.Categorical(
                [*columns["status"], *new["status"][inside:]], categories=list(STATE_NAMES)
            ),
            "message_id": pd.array(
                [*columns["message_id"], *new["message_id"][inside:]], dtype="string"
            ),
            "chunk": pd.array([*columns["chunk"], *new["chunk"][inside:]], dtype="Int64"),
            "error": pd.array([*columns["error"], *new["error"][inside:]], dtype="string"),
        },
        index=pd.Index(labels, dtype=object, name="row"),
    )
    frame.attrs[HEADER] = {**plan.header, "complete": True}
    return frame
