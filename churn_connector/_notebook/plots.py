"""Charts for notebooks: failures by check and column; rows by state; rows delivered over time.

matplotlib is optional (the ``notebook`` extra) and slow to import, so it is imported on the
first plot, with an error that says how to install it. Each function draws on ``ax`` (or on
a new figure) and returns the Axes, as pandas' plots do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .display import COLOURS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MISSING = (
    "plot() draws with matplotlib, which is not installed: "
    "pip install 'churn-connector[notebook]' (or just matplotlib)"
)
STATE_ORDER = ("would_send", "sent", "skipped", "invalid", "rejected", "failed", "expired")


def _axes(ax: Axes | None, bars: int = 6) -> Axes:
    if ax is not None:
        return ax
    try:
        # optional and heavy (the notebook extra): imported only when a chart is drawn
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    _, new = plt.subplots(figsize=(8, 1.2 + 0.35 * max(bars, 3)), layout="constrained")
    return new


def _nothing(ax: Axes, title: str, text: str) -> Axes:
    ax.set_title(title, loc="left")
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return ax


def _barh(ax: Axes, labels: list[str], values: list[int], colours: Any, title: str) -> Axes:
    positions = np.arange(len(labels))
    bars = ax.barh(positions, values, color=colours)
    ax.set_yticks(positions, labels)
    ax.invert_yaxis()  # the largest (or first) on top, as it reads
    ax.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3)
    ax.set_title(title, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    ax.margins(x=0.12)
    ax.locator_params(axis="x", integer=True)  # rows and failures come whole
    return ax


def failures_chart(
    failures: pd.DataFrame, kind: str, ax: Axes | None = None, top: int = 15
) -> Axes:
    """Horizontal bars: failures per (column, check), the ``top`` largest."""
    title = f"{kind}: failures by check and column"
    if failures.empty:
        return _nothing(_axes(ax), title, "no failures")
    column = failures["column"].astype(object).where(failures["column"].notna(), "(table)")
    sizes = (
        pd.DataFrame({"column": column.astype(str), "check": failures["check"].astype(str)})
        .value_counts(sort=True)
        .head(top)
    )
    labels = [f"{col} · {check}" for col, check in sizes.index]
    ax = _barh(_axes(ax, len(labels)), labels, [int(v) for v in sizes], COLOURS["invalid"], title)
    ax.set_xlabel("failures")
    return ax


def states_chart(counts: Mapping[str, int], kind: str, ax: Axes | None = None) -> Axes:
    """Horizontal bars: rows per final state, in the states' colours."""
    shown = [s for s in STATE_ORDER if counts.get(s, 0)]
    title = f"{kind}: rows by state"
    if not shown:
        return _nothing(_axes(ax), title, "no rows")
    ax = _barh(
        _axes(ax, len(shown)),
        [s.replace("_", " ") for s in shown],
        [int(counts[s]) for s in shown],
        [COLOURS[s] for s in shown],
        title,
    )
    ax.set_xlabel("rows")
    return ax


def timeline_chart(chunks: pd.DataFrame, kind: str, ax: Axes | None = None) -> Axes:
    """Rows acknowledged over the send's time; requests that failed or were rejected marked."""
    ax = _axes(ax, 8)
    title = f"{kind}: rows delivered over time"
    ended = chunks[chunks["status"] != "split"].sort_values("finished_s", kind="stable")
    if ended.empty:
        return _nothing(ax, title, "no requests")
    sent = np.where(ended["status"] == "sent", ended["events"], 0)
    delivered = np.cumsum(sent)
    times = ended["finished_s"].to_numpy(dtype=float)
    ax.step(
        np.r_[0.0, times], np.r_[0, delivered], where="post", color=COLOURS["sent"], label="sent"
    )
    for status in ("rejected", "failed"):
        mine = (ended["status"] == status).to_numpy()
        if mine.any():
            ax.scatter(
                times[mine],
                delivered[mine],
                marker="x",
                color=COLOURS[status],
                label=f"{status} request",
                zorder=3,
            )
    ax.set_xlabel("seconds since the send started")
    ax.set_ylabel("rows delivered")
    ax.set_title(title, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="lower right", frameon=False)
    return ax
