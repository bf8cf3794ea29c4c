"""A report as a browser draws it: saved as HTML by nbconvert (JupyterLab's light and dark
themes) and photographed by headless Chromium. Beside the content tests, not instead of
them: this one checks what only a browser shows (Jupyter's table striping, the colours
drawn)."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_notebook, new_output
from PIL import Image

import churn_connector as cc
from churn_connector import samples
from churn_connector._notebook.palette import COLOURS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a browser, in a process of its own

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# the theme's page and its striped rows (--jp-rendermime-table-row-background)
THEMES = {"light": ((255, 255, 255), (245, 245, 245)), "dark": ((17, 17, 17), (33, 33, 33))}


def rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def photograph(html: str, theme: str, folder: Path) -> Counter[tuple[int, ...]]:
    """The pixels of ``html`` shown as a notebook's output in ``theme``, counted by colour."""
    cell = new_code_cell("report")
    cell.outputs = [new_output("execute_result", data={"text/html": html}, execution_count=1)]
    exporter = HTMLExporter(template_name="lab", theme=theme, exclude_input=True)
    page, _ = exporter.from_notebook_node(new_notebook(cells=[cell]))
    source, picture = folder / f"{theme}.html", folder / f"{theme}.png"
    source.write_text(page)
    assert CHROMIUM is not None
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1000,600",
            # a profile of its own: a second Chromium on the default one (another pytest-xdist
            # worker's) hands its page to the first and exits
            f"--user-data-dir={folder / f'profile-{theme}'}",
            f"--screenshot={picture}",
            source.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
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
