"""A report as a browser draws it: saved as HTML by nbconvert (JupyterLab's light and dark
themes) and photographed by headless Chromium. Beside the content tests, not instead of
them: these check what only a browser shows (Jupyter's table striping, the colours drawn,
where the text lands in a narrow window and in which order right-to-left text is drawn)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from nbconvert import HTMLExporter
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook, new_output
from PIL import Image

import churn_connector as cc
from churn_connector import samples
from churn_connector._notebook.palette import COLOURS
from tests.conftest import make_events

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a browser, in a process of its own

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# the theme's page and its striped rows (--jp-rendermime-table-row-background)
THEMES = {"light": ((255, 255, 255), (245, 245, 245)), "dark": ((17, 17, 17), (33, 33, 33))}


def rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def notebook_page(outputs: Sequence[NotebookNode], theme: str) -> str:
    """``outputs`` as one cell's outputs of a notebook saved as HTML in JupyterLab's ``theme``."""
    cell = new_code_cell("report")
    cell.outputs = list(outputs)
    exporter = HTMLExporter(template_name="lab", theme=theme, exclude_input=True)
    page, _ = exporter.from_notebook_node(new_notebook(cells=[cell]))
    return str(page)


def chromium(source: Path, folder: Path, *flags: str) -> str:
    """Headless Chromium on the page ``source`` with ``flags``; what it printed."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--hide-scrollbars",
            # a profile of its own: a second Chromium on the default one (another pytest-xdist
            # worker's) hands its page to the first and exits
            f"--user-data-dir={folder / f'profile-{source.stem}'}",
            *flags,
            source.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def photograph(html: str, theme: str, folder: Path) -> Counter[tuple[int, ...]]:
    """The pixels of ``html`` shown as a notebook's output in ``theme``, counted by colour."""
    output = new_output("execute_result", data={"text/html": html}, execution_count=1)
    source, picture = folder / f"{theme}.html", folder / f"{theme}.png"
    source.write_text(notebook_page([output], theme))
    chromium(source, folder, "--window-size=1000,600", f"--screenshot={picture}")
    with Image.open(picture) as image:
        rgb_image = image.convert("RGB")
        # getdata() is deprecated from Pillow 13, which brings get_flattened_data()
        pixels = getattr(rgb_image, "get_flattened_data", rgb_image.getdata)()
        return Counter(pixels)


@pytest.mark.parametrize("theme", THEMES)
def test_a_report_in_a_browser_has_no_striped_rows_and_its_states_colours(
    theme: str, tmp_path: Path, now: pd.Timestamp
) -> None:
    report = cc.validate_events(samples.sample_events(now, n_events=2000, n_users=200), now=now)
    pixels = photograph(report._repr_html_(), theme, tmp_path)
    page, stripe = THEMES[theme]
    assert pixels.most_common(1)[0][0] == page
    # a striped row paints ~10,000 pixels; a few come from anti-aliasing
    assert pixels[stripe] < 1_000
    for state in ("valid", "invalid"):  # their marks and bars, drawn
        assert pixels[rgb(COLOURS[state])] > 20, state


# -- a narrow window: every reason, example and fix on screen --------------------------------

NARROW = 760  # px: a notebook beside a file browser on a laptop
LAYOUT_JS = Path(__file__).with_name("layout.js")
HEBREW = "\u05d3\u05d5\u05d3"  # דוד: a row label's right-to-left name


@pytest.fixture(scope="module")
def narrow_outputs() -> tuple[list[NotebookNode], cc.SendResult]:
    """A send result with several states and reasons (its labels Hebrew names with row
    numbers) and an identities report with the phone hint, as a notebook shows them, and
    the result's summary as text, printed under them."""
    now = pd.Timestamp.now(tz="UTC").floor("s")
    events = make_events(now - pd.Timedelta(days=10), n=30)
    events.loc[[1, 6, 7], "occurred_at"] = now - pd.Timedelta(days=25)
    events.loc[[12, 13, 14, 19], "occurred_at"] = now + pd.Timedelta(minutes=4)
    events.loc[22, "event_type"] = "Bad Type"
    events.loc[23, "occurred_at"] = now - pd.Timedelta(days=60)
    events = pd.concat([events, events.iloc[[25]]], ignore_index=True)  # a repeat: skipped
    events.index = pd.Index([f"{HEBREW}:{i}" for i in range(len(events))])
    # the first request meets a clock 10 days ahead, the second one an hour behind
    clocks = iter([now + pd.Timedelta(days=10), now - pd.Timedelta(hours=1)])
    with cc.Sandbox(clock=lambda: next(clocks, now).to_pydatetime()) as sb:
        client = cc.Client(sb.base_url, sb.api_key, bisect_rejected=False, max_concurrency=1)
        res = client.send_events(events, now=now, batch_size=10, progress=False)
    assert {s for s, n in res.counts.items() if n} == {"sent", "skipped", "invalid", "rejected"}
    users = pd.DataFrame(
        {"external_user_id": ["u1", "u2"], "phone": ["12345", "+14155550100"]},
    )
    report = cc.validate_identities(users)
    outputs = [
        new_output("execute_result", data={"text/html": res._repr_html_()}, execution_count=1),
        new_output("display_data", data={"text/html": report._repr_html_()}),
        new_output("stream", name="stdout", text=res.summary() + "\n"),
    ]
    return outputs, res


def laid_out(
    outputs: Sequence[NotebookNode], theme: str, wanted: Sequence[str], folder: Path
) -> dict[str, Any]:
    """Where Chromium, its window ``NARROW`` px wide, draws each of the ``wanted`` texts."""
    script = (
        f'<script type="application/json" id="layout-wanted">{json.dumps(wanted)}</script>'
        f"<script>{LAYOUT_JS.read_text()}</script>"
    )
    source = folder / f"narrow-{theme}.html"
    source.write_text(notebook_page(outputs, theme).replace("</body>", script + "</body>"))
    dom = chromium(source, folder, f"--window-size={NARROW},2400", "--dump-dom")
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.DOTALL)
    assert found is not None, dom[-2000:]
    layout: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return layout


def luminance(rgb: Sequence[float]) -> float:
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(text: Sequence[float], opacity: float, page: Sequence[float]) -> float:
    """The contrast ratio of ``text`` (rgba) drawn at ``opacity`` on ``page`` (rgb)."""
    alpha = (text[3] if len(text) > 3 else 1.0) * opacity
    drawn = [alpha * t + (1 - alpha) * p for t, p in zip(text[:3], page[:3], strict=True)]
    light, dark = sorted((luminance(drawn), luminance(page)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


# the ends of the examples' messages (their fixes), the hints, a reason: each must be drawn
ON_SCREEN = (
    "(whole value; no spaces, capitals or newlines)",  # event_type_pattern's fix
    "(now \u2212 30 days .. now + 5 minutes)",  # occurred_at_window's
    "or pass phone_region='US' (the ISO code of its country) to read national numbers",
    "more than 5 minutes after server time",
    "the answer named other events of the request, not this one",
    "res.plot()",
    "report.plot() charts the failures",
)


@pytest.mark.parametrize("theme", THEMES)
def test_at_760_px_every_example_and_fix_is_drawn_inside_the_window_and_readable(
    theme: str, tmp_path: Path, narrow_outputs: tuple[list[NotebookNode], cc.SendResult]
) -> None:
    outputs, _ = narrow_outputs
    layout = laid_out(outputs, theme, ON_SCREEN, tmp_path)
    assert layout["width"] == NARROW
    assert layout["scroll_width"] <= NARROW  # nothing to scroll sideways to
    page = layout["background"]
    assert page[:3] == list(THEMES[theme][0])
    for text in ON_SCREEN:
        seen = layout["seen"][text]
        assert seen is not None, f"{text!r} is not on the page"
        assert seen["rects"], f"{text!r} takes no room: hidden"
        for box in seen["rects"]:
            assert box["left"] >= 0 and box["right"] <= NARROW, (text, box)
            assert box["on_top"], f"{text!r} is covered or clipped where it is drawn"
        assert seen["visibility"] == "visible" and seen["font_px"] >= 12, text
        assert contrast(seen["color"], seen["opacity"], page) >= 4.5, (text, seen)


def drawn_order(chars: list[list[Any]]) -> str:
    """The characters as the eye reads them on screen, left to right."""
    return "".join(c for c, _, _ in sorted(chars, key=lambda c: c[1]))


@pytest.mark.parametrize("theme", THEMES)
def test_a_right_to_left_label_keeps_its_row_number_at_its_end_in_html_and_text(
    theme: str, tmp_path: Path, narrow_outputs: tuple[list[NotebookNode], cc.SendResult]
) -> None:
    outputs, res = narrow_outputs
    # the HTML's example row, and the summary's text line (Unicode isolates, in a <pre>)
    wanted = [f"row {HEBREW}:12", f"row \u2066\u2068{HEBREW}\u2069:12\u2069"]
    layout = laid_out(outputs, theme, wanted, tmp_path)
    for text in wanted:
        seen = layout["seen"][text]
        assert seen is not None, text
        drawn = drawn_order([c for c in seen["chars"] if c[2] > c[1]])  # isolates: no width
        # Hebrew runs right to left inside its isolate; the row number stays after it
        assert drawn == f"row {HEBREW[::-1]}:12", (text, drawn)
    assert f"row {HEBREW}:12" in drawn_text(res._repr_html_())
    line = next(x for x in res.summary().splitlines() if x.startswith("rejected 4:"))
    assert f"row \u2066\u2068{HEBREW}\u2069:12\u2069)" in line


def drawn_text(page: str) -> str:
    """``page``'s text, its tags dropped."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))
