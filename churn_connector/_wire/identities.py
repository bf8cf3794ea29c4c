"""Valid identity rows -> identify bodies (contract 2.2) and their bytes.

Only rows that passed validation reach this module, so it converts without re-checking.
``channels`` lists the explicit items first, then those built from the convenience columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._json import is_missing
from .._options import USER_ID, IdentityOptions
from .._validate import ids_to_wire, merged_objects
from .canonical import canonical
from .channels import convenience_items, explicit_items
from .consent import EXPLICIT, Marks


def build_identities(
    work: pd.DataFrame, options: IdentityOptions
) -> tuple[list[dict[str, Any]], Marks]:
    """Identify bodies for validated rows of ``work`` (a RangeIndex frame), in row order,
    and per row what the consent notes count (``consent.ConsentTally``)."""
    n = len(work)
    if n == 0:
        return [], {}
    user_ids = ids_to_wire(work[USER_ID])
    traits = merged_objects(work, "traits", options.rules)
    preferred = work["preferred_channel"].tolist() if "preferred_channel" in work else [None] * n
    explicit = explicit_items(work)
    convenience, marks = convenience_items(work, options.phone_region, options.blank_consent)
    if EXPLICIT in work.columns:
        # items of the channels column go as given: without opted_in, the API's default
        unstated = [sum("opted_in" not in item for item in items) for items in explicit]
        marks["opted_in_by_default", EXPLICIT] = np.array(unstated, dtype=np.int64)
    bodies = []
    for i in range(n):
        body: dict[str, Any] = {USER_ID: user_ids[i]}
        if traits[i]:
            body["traits"] = traits[i]
        if not is_missing(preferred[i]):
            body["preferred_channel"] = str(preferred[i])
        channels = explicit[i] + convenience[i]
        if channels:
            body["channels"] = channels
        bodies.append(body)
    return bodies, marks


def body_bytes(body: dict[str, Any]) -> bytes:
    """The bytes sent for one identify body: canonical JSON (sorted keys, compact, UTF-8)."""
    return canonical(body)
