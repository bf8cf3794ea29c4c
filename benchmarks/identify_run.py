"""One ``identify`` call in a fresh process, as a user's script or task makes it.

    python benchmarks/identify_run.py BASE_URL USERS

Builds ``churn_connector.samples.sample_users(USERS)`` (not timed), then times
``cc.Client(BASE_URL, key).identify(users)`` at the default concurrency, from the call to
its return: the first call's pandera import and schema build are inside, as they are for a
user. Prints one JSON line: ``started`` (``time.monotonic()``, the same clock as the
receiver's on this machine), ``seconds``, the counts and the concurrency. The key comes
from ``CHURN_API_KEY`` (the harness's child environment).
"""

from __future__ import annotations

import os
import sys
import time

import orjson

import churn_connector as cc
from churn_connector.samples import sample_users


def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    users = sample_users(count)
    client = cc.Client(url, os.environ["CHURN_API_KEY"])
    started = time.monotonic()
    result = client.identify(users, progress=False)
    seconds = time.monotonic() - started
    out = {
        "started": started,
        "seconds": seconds,
        "counts": {k: int(v) for k, v in result.counts.items()},
        "concurrency": client.config.identify_concurrency,
    }
    sys.stdout.write(orjson.dumps(out).decode() + "\n")


if __name__ == "__main__":
    main()
