"""Sample exports for the demo, the notebooks and the docs: realistic, with a few bad rows.

    from churn_connector import samples
    events = samples.sample_events()                             # events, ~0.2% bad rows
    users = samples.sample_users()                               # identities, 3 bad rows

The bad rows are of different kinds (event types, naive or old timestamps, JSON that is not
an object or holds NaN, blank ids, bad emails and phones), so a report shows what they look
like. The data is made up; seeds make it the same on every call.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import orjson
import pandas as pd

__all__ = ["EVENT_TYPES", "PLANS", "sample_events", "sample_users"]

# One missing value, as the frames the package gives back have it (``res.rows``,
# ``res.chunks``, ``report.failures``): pandas' nullable dtypes (``string``, ``boolean``,
# ``Int64``, ``Float64``), whose missing value is ``pd.NA``, shown ``<NA>``, whatever the
# column's type. ``None`` in an object column and ``NaN`` in a float one print differently
# (``None``, ``NaN``) and say nothing more; NaN is also a float *value*, which a missing
# amount is not.
_MISSING = pd.NA

EVENT_TYPES = ["login", "page_view", "feature_used", "invoice_paid", "support_ticket", "logout"]
PLANS = ["free", "starter", "pro", "enterprise"]


def sample_events(
    now: pd.Timestamp | dt.datetime | None = None,
    n_events: int = 3000,
    n_users: int = 300,
    seed: int = 7,
) -> pd.DataFrame:
    """A warehouse-like events export with a handful of bad rows (labelled by position).

    ``now``: the instant the events lead up to (they fall within the 20 days before it);
    by default the current time. An aware timestamp: a naive one names no instant.
    """
    now = _instant(now)
    if isinstance(n_events, bool) or not isinstance(n_events, int) or n_events < 0:
        raise ValueError(f"n_events must be a whole number of at least 0, not {n_events!r}")
    rng = np.random.default_rng(seed)
    users = rng.integers(1, n_users + 1, n_events)
    ages = pd.to_timedelta(rng.integers(60, 20 * 86_400, n_events), unit="s")
    # exports mix offsets; each value still names its own, so nothing is guessed
    zones = rng.choice([0, 60, -300, 330], n_events)
    occurred = [
        t.tz_convert(dt.timezone(dt.timedelta(minutes=int(z)))).isoformat(timespec="milliseconds")
        for t, z in zip(now - ages, zones, strict=True)
    ]
    props = [
        orjson.dumps({"session_s": int(s), "screen": f"s{int(k)}"}).decode()
        for s, k in zip(rng.integers(1, 3600, n_events), rng.integers(1, 40, n_events), strict=True)
    ]
    df = pd.DataFrame(
        {
            "external_user_id": [f"cust_{u:05d}" for u in users],
            "event_type": rng.choice(EVENT_TYPES, n_events),
            "occurred_at": occurred,
            "properties": props,
            "properties.plan": rng.choice(PLANS, n_events),
            "properties.amount_eur": pd.array(
                np.where(rng.random(n_events) < 0.2, rng.random(n_events) * 100, np.nan),
                dtype="Float64",  # NaN becomes <NA>: the one missing value (see _MISSING)
            ),
        }
    )
    bad = {
        11: ("event_type", "Add To Cart"),
        57: ("event_type", "login\n"),
        123: ("occurred_at", (now - pd.Timedelta(days=2)).tz_localize(None).isoformat()),
        456: ("occurred_at", (now - pd.Timedelta(days=45)).isoformat()),
        789: ("properties", "[1, 2]"),
        1011: ("properties", '{"score": NaN}'),
        1213: ("external_user_id", " "),
    }
    for row, (column, value) in bad.items():
        if row < n_events:
            df.loc[row, column] = value
    if n_events == 0:
        return df
    # the same event exported twice: sent once, reported as skipped (the sixth, or the last
    # of fewer)
    return pd.concat([df, df.iloc[[min(5, n_events - 1)]]], ignore_index=True)


def _instant(now: object) -> pd.Timestamp:
    if now is None:
        return pd.Timestamp.now(tz="UTC")
    if isinstance(now, int | float) and not isinstance(now, bool):
        raise TypeError(
            f"sample_events' first argument is the instant the events lead up to, not a "
            f"count: for {now!r} events, sample_events(n_events={now!r})"
        )
    if not isinstance(now, pd.Timestamp | dt.datetime):
        raise TypeError(f"now must be a timestamp such as pd.Timestamp.now(tz='UTC'), not {now!r}")
    stamp = pd.Timestamp(now)
    if stamp.tzinfo is None:
        raise TypeError(
            f"now={now!r} has no time zone, so it names no instant: pass an aware one, "
            "such as pd.Timestamp.now(tz='UTC')"
        )
    return stamp


def sample_users(n_users: int = 300, seed: int = 11) -> pd.DataFrame:
    """A users export (one row per user) with opt-outs, a few preferred channels and bad rows."""
    rng = np.random.default_rng(seed)
    ids = [f"cust_{u:05d}" for u in range(1, n_users + 1)]
    has_phone = rng.random(n_users) < 0.4
    has_push = rng.random(n_users) < 0.3
    df = pd.DataFrame(
        {
            "external_user_id": ids,
            "email": [f"{u}@example.com" for u in ids],
            "email_opted_in": pd.array(rng.random(n_users) > 0.1, dtype="boolean"),
            "email_verified": pd.array(rng.random(n_users) > 0.5, dtype="boolean"),
            "phone": pd.array(
                [f"+1415555{i:04d}" if p else None for i, p in enumerate(has_phone)],
                dtype="string",
            ),
            "sms_opted_in": pd.array(
                [
                    bool(x) if p else None
                    for x, p in zip(rng.random(n_users) > 0.3, has_phone, strict=True)
                ],
                dtype="boolean",
            ),
            "push_token": pd.array(
                [f"tok_{i:06x}" if p else None for i, p in enumerate(has_push)], dtype="string"
            ),
            "preferred_channel": pd.array([None] * n_users, dtype="string"),
            "traits.plan": rng.choice(PLANS, n_users),
            "traits.seats": pd.array(rng.integers(1, 50, n_users), dtype="Int64"),
        }
    )
    df.loc[[3, 8], "preferred_channel"] = ["email", "sms"]
    df.loc[8, "phone"] = "+14155550199"
    df.loc[8, "sms_opted_in"] = True  # a phone needs its consent: a blank is not consent
    bad = {
        21: ("email", "not-an-email"),
        42: ("phone", "(415) 555-0100"),  # a national number: not E.164 without phone_region
        77: ("preferred_channel", "pigeon"),
    }
    for row, (column, value) in bad.items():
        if row < n_users:
            df.loc[row, column] = value
    return df
