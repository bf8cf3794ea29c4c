"""One colour and one mark per state: apart from each other, for colour-blind eyes too, and
readable on light and dark notebook themes (WCAG contrast from relative luminance)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from churn_connector._notebook.display import MUTED_OPACITY
from churn_connector._notebook.palette import COLOURS, MARKS, ORDER

# the backgrounds a report or a chart sits on: JupyterLab light (page, striped row),
# JupyterLab dark (page, striped row), VS Code's dark editor
LIGHT = ("#ffffff", "#f5f5f5")
DARK = ("#111111", "#212121", "#1e1e1e")
# the theme's text colour over its background: JupyterLab light and dark, classic Notebook,
# VS Code dark
THEMES = {
    "JupyterLab light": ((0, 0, 0, 0.87), "#ffffff"),
    "JupyterLab dark": ((255, 255, 255, 1.0), "#111111"),
    "Notebook": ((0, 0, 0, 1.0), "#ffffff"),
    "VS Code dark": ((204, 204, 204, 1.0), "#1e1e1e"),
}
# Machado, Oliveira & Fernandes (2009), severity 1: linear RGB -> as seen
SIMULATIONS = {
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                     [-0.011820, 0.042940, 0.968881]],
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                   [-0.003882, -0.048116, 1.051998]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                   [0.004733, 0.691367, 0.303900]],
}  # fmt: skip


def rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def linear(values: np.ndarray) -> np.ndarray:
    c = values / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def luminance(values: np.ndarray) -> float:
    r, g, b = linear(values)
    return float(0.2126 * r + 0.7152 * g + 0.0722 * b)


def contrast(a: np.ndarray, b: np.ndarray) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def lab(linear_rgb: np.ndarray) -> np.ndarray:
    xyz = np.array(
        [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]
    ) @ np.clip(linear_rgb, 0, 1)
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def distance(a: str, b: str, seen_as: str | None = None) -> float:
    """CIE76 ΔE between two colours, as a person with ``seen_as`` sees them."""
    la, lb = linear(rgb(a)), linear(rgb(b))
    if seen_as is not None:
        m = np.array(SIMULATIONS[seen_as])
        la, lb = m @ la, m @ lb
    return float(np.linalg.norm(lab(la) - lab(lb)))


def over(rgba: tuple[float, float, float, float], background: str) -> np.ndarray:
    """A colour with alpha, painted over ``background``."""
    *colour, alpha = rgba
    return alpha * np.array(colour) + (1 - alpha) * rgb(background)


def test_every_state_has_a_colour_and_a_mark_of_its_own() -> None:
    assert len({COLOURS[s] for s in ORDER}) == len(ORDER)
    assert len({MARKS[s] for s in ORDER}) == len(ORDER)
    # a report's valid rows are a dry run's: valid, not sent (yet)
    assert (COLOURS["valid"], MARKS["valid"]) == (COLOURS["would_send"], MARKS["would_send"])


@pytest.mark.parametrize("background", LIGHT + DARK)
def test_every_colour_stands_out_on_light_and_dark_backgrounds(background: str) -> None:
    for state in ORDER:  # WCAG 2.1, 1.4.11: graphics and marks at 3:1
        assert contrast(rgb(COLOURS[state]), rgb(background)) >= 3.0, state


@pytest.mark.parametrize("seen_as", [None, *SIMULATIONS])
def test_the_colours_stay_apart_for_colour_blind_eyes(seen_as: str | None) -> None:
    least = 30.0 if seen_as is None else 12.0  # and every state has its mark besides
    for a, b in itertools.combinations(ORDER, 2):
        assert distance(COLOURS[a], COLOURS[b], seen_as) >= least, (a, b)


def test_rejected_and_failed_look_nothing_alike() -> None:
    assert COLOURS["rejected"] != COLOURS["failed"] and MARKS["rejected"] != MARKS["failed"]
    for seen_as in (None, *SIMULATIONS):
        assert distance(COLOURS["rejected"], COLOURS["failed"], seen_as) >= 15.0


@pytest.mark.parametrize("theme", THEMES)
def test_muted_text_keeps_a_contrast_of_four_and_a_half_in_every_theme(theme: str) -> None:
    text, background = THEMES[theme]
    solid = over(text, background)
    muted = MUTED_OPACITY * solid + (1 - MUTED_OPACITY) * rgb(background)
    assert contrast(muted, rgb(background)) >= 4.5
