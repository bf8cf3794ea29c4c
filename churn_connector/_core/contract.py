"""The API contract's numbers and paths, in one place (api-contract sections 4 and 8).

The sandbox keeps its own copy on purpose: it is written from the contract alone and shares
nothing with the client, so a misreading here cannot hide itself there.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

EVENTS_PATH: Final = "/v1/events/batch"
TRACK_PATH: Final = "/v1/events/track"
IDENTIFY_PATH: Final = "/v1/identify"

MAX_BATCH_SIZE: Final = 500  # events per batch request
PAST_WINDOW: Final = timedelta(days=30)  # occurred_at at most this far behind the API's now
FUTURE_WINDOW: Final = timedelta(minutes=5)  # ... and at most this far ahead of it
