"""One colour and one mark per row state, the same in every view: the HTML of reports and
results, the charts, the progress bar (docs/concepts/row-states.md draws them).

The colours are drawn on the page's own background, which the notebook's theme decides, so
each keeps a 3:1 contrast (WCAG's for graphics) against light and dark backgrounds alike, and
they stay apart for colour-blind eyes (checked under simulated deuteranopia, protanopia and
tritanopia). Colour is never alone: each state has its own mark and its name beside it. Text
is never drawn in these colours: it keeps the theme's own text colour.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StateStyle:
    """How one state looks: its colour, its mark, and what it means in a few words."""

    colour: str
    mark: str
    meaning: str


STATES: dict[str, StateStyle] = {
    # a dry run's valid rows, and a report's: valid, not sent (yet)
    "would_send": StateStyle("#427cb7", "○", "valid, ready to send"),
    "valid": StateStyle("#427cb7", "○", "ready to send"),
    "sent": StateStyle("#099d52", "✔", "acknowledged by the API"),
    "skipped": StateStyle(
        "#7b8184", "↷", "already delivered (ledger) or a repeat of an earlier row"
    ),
    "invalid": StateStyle("#a05c1b", "✘", "never sent: fix the data"),
    "rejected": StateStyle("#d910aa", "⊘", "the API refused them: fix the data"),
    "failed": StateStyle("#ef5752", "↻", "not delivered: send again (safe to re-send)"),
    "expired": StateStyle("#a28a06", "◷", "aged out of the 30-day window before sending"),
    "held": StateStyle(
        "#8e6bd8", "⏸", "delivered before under another message id: not sent (see new_ids)"
    ),
}
COLOURS: dict[str, str] = {name: style.colour for name, style in STATES.items()}
MARKS: dict[str, str] = {name: style.mark for name, style in STATES.items()}
# the order states are listed in: the good news first, then what needs a hand
ORDER: tuple[str, ...] = (
    "would_send",
    "sent",
    "skipped",
    "invalid",
    "rejected",
    "failed",
    "expired",
    "held",
)
# the headline speaks for the worst state present, most urgent first
WORST_FIRST: tuple[str, ...] = ("failed", "rejected", "expired", "held", "invalid")
