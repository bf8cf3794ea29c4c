"""Charts for notebooks: failures by check and column; rows by state; rows delivered over time.

matplotlib is optional (the ``notebook`` extra) and slow to import, so it is imported on the
first plot, with an error that says how to install it. Each function draws on ``ax`` (or on
a new figure) and returns the Axes, as pandas' plots do.

States wear the colours and marks of ``palette``, as in the HTML. Counts are written with
thousands separators. A new figure has a transparent background, so it sits on the
notebook's own: the inline backend tells the front end which background its text needs, and
JupyterLab, VS Code and nbconvert put one behind it only where the theme's would not do (a
matplotlib style you chose, ``dark_background`` say, is followed). A figure you pass in
(``ax=``) is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .palette import COLOURS, MARKS, ORDER

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MISSING = (
    "plot() draws with matplotlib, which is not installed: "
    "pip install 'churn-connector[notebook]' (or just matplotlib)"
)
STATE_ORDER = ORDER
MIN_SLOTS = 3  # a chart has room for three bars at least: one bar is a bar, not a slab
BAR_HEIGHT = 0.6


def _axes(ax: Axes | None, bars: int = 6) -> Axes:
    if ax is not None:
        return ax
    try:
        # optional and heavy (the notebook extra): imported only when a chart is drawn
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    fig, new = plt.subplots(figsize=(8, 1.0 + 0.32 * max(bars, MIN_SLOTS)), layout="constrained")
    fig.patch.set_alpha(0.0)  # the notebook's background shows through
    new.set_facecolor("none")
    return new


def thousands(axis: Any) -> None:
    """Ticks of ``axis`` as whole numbers with thousands separators (1,234,567)."""
    # optional and heavy (the notebook extra): only reached once a chart is drawn
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter  # noqa: PLC0415

    axis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))  # whole rows
    axis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def _nothing(ax: Axes, title: str, text: str) -> Axes:
    ax.set_title(title, loc="left")
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return ax


def _barh(ax: Axes, labels: list[str], values: list[int], colours: Any, title: str) -> Axes:
    positions = np.arange(len(labels))
    bars = ax.barh(positions, values, height=BAR_HEIGHT, color=colours)
    ax.set_yticks(positions, labels)
    # the largest (or first) on top, as it reads; never fewer than MIN_SLOTS rows of room
    pad = max(MIN_SLOTS - len(labels), 0) / 2
    ax.set_ylim(len(labels) - 0.5 + pad, -0.5 - pad)
    ax.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3)
    ax.set_title(title, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    ax.margins(x=0.12)
    thousands(ax.xaxis)
    return ax


def failure_label(column: str, check: str) -> str:
    """A bar's label: the check, and its column where the check's name does not say it."""
    if check == column or check.startswith(f"{column}_"):
        return check
    return f"{column} · {check}"


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
    labels = [failure_label(col, check) for col, check in sizes.index]
    ax = _barh(_axes(ax, len(labels)), labels, [int(v) for v in sizes], COLOURS["invalid"], title)
    ax.set_xlabel("failures")
    return ax


def states_chart(counts: Mapping[str, int], kind: str, ax: Axes | None = None) -> Axes:
    """Horizontal bars: rows per final state, in the states' colours, marked."""
    shown = [s for s in STATE_ORDER if counts.get(s, 0)]
    title = f"{kind}: rows by state"
    if not shown:
        return _nothing(_axes(ax), title, "no rows")
    ax = _barh(
        _axes(ax, len(shown)),
        [f"{MARKS[s]} {s}" for s in shown],
        [int(counts[s]) for s in shown],
        [COLOURS[s] for s in shown],
        title,
    )
    ax.set_xlabel("rows")
    return ax


_REQUEST_LEGEND = {
    "rejected": "rejected request (fix the data)",
    "failed": "failed request (send again)",
}


def timeline_chart(chunks: pd.DataFrame, kind: str, ax: Axes | None = None) -> Axes:
    """Rows acknowledged over the send's time; requests that failed or were rejected marked
    with their state's mark and colour."""
    ax = _axes(ax, 8)
    title = f"{kind}: rows delivered over time"
    ended = chunks[chunks["status"] != "split"].sort_values("finished_s", kind="stable")
    if ended.empty:
        return _nothing(ax, title, "no requests")
    sent = np.where(ended["status"] == "sent", ended["events"], 0)
    delivered = np.cumsum(sent)
    times = ended["finished_s"].to_numpy(dtype=float)
    ax.step(
        np.r_[0.0, times],
        np.r_[0, delivered],
        where="post",
        color=COLOURS["sent"],
        label=f"{MARKS['sent']} sent",
    )
    for status, legend in _REQUEST_LEGEND.items():
        mine = (ended["status"] == status).to_numpy()
        if mine.any():
            ax.scatter(
                times[mine],
                delivered[mine],
                marker=f"${MARKS[status]}$",
                s=90,
                color=COLOURS[status],
                label=legend,
                zorder=3,
            )
    ax.set_xlabel("seconds since the send started")
    ax.set_ylabel("rows delivered")
    thousands(ax.yaxis)
    ax.set_title(title, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", frameon=False)  # the line climbs away from that corner
    return ax
