"""``validate`` without ``--passed`` keeps none of the rows that passed: its memory grows
by the row book's few bytes a row, not by the rows. Real processes, their peak RSS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import Figures

pytestmark = pytest.mark.e2e

# the program as users run it, in a child of a fresh interpreter, which reports its peak
_PEAK = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run([sys.executable, '-m', 'churn_connector._cli', *sys.argv[1:]])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(done.returncode)\n"
)


def _export(path: Path, n: int, now: pd.Timestamp) -> Path:
    pd.DataFrame(
        {
            "external_user_id": [f"user_{i % 5000}" for i in range(n)],
            "event_type": "login",
            "occurred_at": now - pd.to_timedelta(np.arange(n) % 86_400, unit="s"),
            "properties.plan": "pro",
        }
    ).to_parquet(path)
    return path


def _peak_kib(path: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, "validate", "events", str(path), "-q"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stderr.strip().splitlines()[-1])


def test_validate_without_passed_keeps_memory_flat_in_the_rows(
    now: pd.Timestamp, tmp_path: Path, figures: Figures
) -> None:
    small, large = 500_000, 3_500_000
    low = _peak_kib(_export(tmp_path / "small.parquet", small, now))
    high = _peak_kib(_export(tmp_path / "large.parquet", large, now))
    per_row = (high - low) * 1024 / (large - small)
    figures(f"validate without --passed: {per_row:.0f} bytes a row ({low} -> {high} KiB)")
    assert per_row < 40, per_row  # the rows themselves cost ~80 a row here
