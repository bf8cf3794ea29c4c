"""IdentityOptions, and the column vocabulary of an identities table (contract 2.2–2.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from .._exceptions import ConfigurationError
from .._options import TableOptions, one_of
from .._types import CHANNELS, Duplicates

USER_ID = "external_user_id"
ITEM_FIELDS = ("channel", "address", "opted_in", "verified")
PUSH_COLUMNS = ("push_token", "pushToken")
# convenience columns in wire order: channel -> the columns that carry its address
ADDRESS_COLUMNS = {"email": ("email",), "sms": ("phone",), "push": PUSH_COLUMNS}
FLAGS = tuple(f"{c}_{f}" for c in CHANNELS for f in ("opted_in", "verified"))
E164_PATTERN = r"\+[1-9][0-9]{1,14}"
EMAIL_PATTERN = r"[^@\s]+@[^@\s]+\.[^@\s]+"


@dataclass(frozen=True, kw_only=True)
class IdentityOptions(TableOptions):
    """How identities are validated, become identify bodies, and how repeats are handled.

    ``phone_region`` (an ISO 3166 code, stored upper-case) also accepts national numbers
    valid in that region; ``duplicates`` says what several rows for one user mean.
    """

    phone_region: str | None = None
    duplicates: Duplicates = "error"

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of("duplicates", self.duplicates, get_args(Duplicates))
        if self.phone_region is not None:
            import phonenumbers  # noqa: PLC0415 - ~15 ms to import; only a region needs it

            region = str(self.phone_region).upper()
            if region not in phonenumbers.SUPPORTED_REGIONS:
                raise ConfigurationError(
                    f"phone_region {self.phone_region!r} is not a region phonenumbers knows; "
                    "use an ISO 3166 code such as 'US' or 'GB'"
                )
            object.__setattr__(self, "phone_region", region)
