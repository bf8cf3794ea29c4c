"""Users with several rows, found by a cheap pass over the id column before validation.

Input is streamed in slices, so the rows of one user may sit in different slices; knowing
them up front makes every slice size give the same result.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow

from .. import _columns
from .._inputs import ReadSpec, iter_frames
from .._types import DataSource
from .options import USER_ID


def duplicate_users(data: DataSource, reading: ReadSpec) -> dict[str, list[int]]:
    """Wire user id -> row positions (0-based, ascending), for users with two rows or more.

    Reads only ``external_user_id`` where the input allows; rows whose id is invalid are
    left out (validation reports them). ``data`` is read again later, so it must be
    replayable (``_inputs.replayable``).
    """
    ids: list[pyarrow.Array] = []
    positions: list[np.ndarray] = []
    offset = 0
    for df in iter_frames(data, reading, columns=[USER_ID]):
        if USER_ID in df.columns:
            s = df[USER_ID]
            ok = (_columns.id_type_ok(s) & s.notna() & _columns.not_blank(s)).to_numpy(bool)
            ids.append(pyarrow.array(_columns.ids_to_wire(s[ok]), type=pyarrow.string()))
            positions.append(offset + np.flatnonzero(ok))
        offset += len(df)
    if not ids:
        return {}
    # Arrow-backed strings keep millions of ids compact; duplicated() is vectorised
    wire = pd.Series(pd.arrays.ArrowExtensionArray(pyarrow.chunked_array(ids)))
    repeated = wire.duplicated(keep=False).to_numpy(dtype=bool)
    out: dict[str, list[int]] = {}
    for user, pos in zip(
        wire[repeated].tolist(), np.concatenate(positions)[repeated].tolist(), strict=True
    ):
        out.setdefault(user, []).append(pos)
    return out
