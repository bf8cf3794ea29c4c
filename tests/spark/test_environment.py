"""With PySpark installed, importing the package changes nothing and warns about nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# what a Spark user's script does; -W error: any warning fails the import
SCRIPT = """
import json, os
before = dict(os.environ)
{first}
import churn_connector as cc
import pandas as pd
now = pd.Timestamp.now(tz="UTC")
frame = pd.DataFrame({{"external_user_id": ["u1"], "event_type": ["login"], "occurred_at": [now]}})
assert cc.validate_events(frame).ok  # pandera's lazily loaded checks load here
print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))
"""


@pytest.mark.parametrize("first", ["", "from pyspark.sql import SparkSession"])
def test_importing_the_package_leaves_a_spark_users_process_alone(first: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_LOCAL_IP", "PYARROW_IGNORE_TIMEZONE")
    }
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", SCRIPT.format(first=first)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    # neither SPARK_LOCAL_IP (a driver would bind to 127.0.0.1) nor PYARROW_IGNORE_TIMEZONE
    assert json.loads(out.stdout) == []
