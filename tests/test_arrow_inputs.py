"""Arrow-native inputs: the same rows through pandas, pyarrow, polars and DuckDB give the same
wire events and message ids; nested time zones survive; nothing is materialised whole."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pandas as pd
import pyarrow as pa

import churn_connector as cc


def test_importing_the_package_leaves_the_environment_alone() -> None:
    # pandera sets PYARROW_IGNORE_TIMEZONE on import, which makes pyarrow drop nested zones
    code = (
        "import os, json; before = dict(os.environ); import churn_connector; "
        "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYARROW_IGNORE_TIMEZONE",)}
    env.pop("SPARK_LOCAL_IP", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_tz_aware_timestamp_inside_a_struct_property_stays_aware(now: pd.Timestamp) -> None:
    paid = (now - pd.Timedelta(hours=2)).to_pydatetime()
    table = pa.table(
        {
            "external_user_id": ["u1"],
            "event_type": ["order_placed"],
            "occurred_at": pa.array([now - pd.Timedelta(hours=1)], pa.timestamp("us", "UTC")),
            "properties": pa.array(
                [{"paid_at": paid, "tries": [paid]}],
                pa.struct(
                    [
                        ("paid_at", pa.timestamp("us", "Asia/Kolkata")),
                        ("tries", pa.list_(pa.timestamp("ms", "America/New_York"))),
                    ]
                ),
            ),
        }
    )
    report = cc.validate_events(table, now=now)
    assert report.ok, report.summary()
    wire = cc.events_to_wire(table, now=now)
    expected = (
        paid.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{paid.microsecond // 1000:03d}Z"
    )
    assert wire[0]["properties"] == {"paid_at": expected, "tries": [expected]}
