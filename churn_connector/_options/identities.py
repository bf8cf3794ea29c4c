"""IdentityOptions, and the column vocabulary of an identities table (contract 2.2–2.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from .._core import CHANNELS, BlankConsent, ConfigurationError, Duplicates, declare, registered
from .table import TableOptions, one_of

USER_ID = "external_user_id"
ITEM_FIELDS = ("channel", "address", "opted_in", "verified")
PUSH_COLUMNS = ("push_token", "pushToken")
# convenience columns in wire order: channel -> the columns that carry its address
ADDRESS_COLUMNS = {"email": ("email",), "sms": ("phone",), "push": PUSH_COLUMNS}
FLAGS = tuple(f"{c}_{f}" for c in CHANNELS for f in ("opted_in", "verified"))
# channel -> the column of its consent flag
CONSENT_COLUMNS: dict[str, str] = {channel: f"{channel}_opted_in" for channel in CHANNELS}
E164_PATTERN = r"\+[1-9][0-9]{1,14}"
EMAIL_PATTERN = r"[^@\s]+@[^@\s]+\.[^@\s]+"


@registered
@dataclass(frozen=True, kw_only=True)
class IdentityOptions(TableOptions):
    """How identities are validated, become identify bodies, and how repeats are handled:
    the keywords of :func:`validate_identities`, as one value to pass whole (``options=``),
    immutable and checked when made (the text-export keywords as ``text=cc.TextFormat(...)``).

    ``phone_region`` (an ISO 3166 code, stored upper-case) also accepts national numbers
    valid in that region; ``duplicates`` says what several rows for one user mean.
    ``blank_consent`` says what a blank ``<channel>_opted_in`` cell beside an address means
    (``"error"``: the row is invalid); ``require_consent`` refuses rows whose address has no
    consent column, and ``channels`` items without ``opted_in``.
    """

    phone_region: str | None = declare(
        None,
        doc='read national phone numbers of this region (`"US"`)',
        help="region of national numbers",
        metavar="CC",
    )
    blank_consent: BlankConsent = declare(
        "error",
        doc="a blank `<channel>_opted_in` cell beside an address: the row is invalid "
        '(`"error"`), the channel is left out (`"omit_channel"`), or sent opted in '
        '(`"opted_in"`) ([Consent](../guides/identities.md#consent))',
        help="a blank <channel>_opted_in cell beside an address makes the row invalid (error, "
        "the default), leaves that channel out (omit_channel), or sends it opted in (opted_in)",
    )
    require_consent: bool = declare(
        False,
        doc="an address without a consent column, or a `channels` item without `opted_in`, "
        "makes the row invalid",
        help="refuse rows with an address but no <channel>_opted_in column, and channels items "
        "without opted_in (otherwise opted in, the contract's default)",
    )
    duplicates: Duplicates = declare(
        "error",
        doc='several rows for one user: `"error"`, `"keep_last"`, `"in_order"` '
        "([Sync identities](../guides/identities.md#several-rows-for-one-user))",
        help="what to do with several rows for one user",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of("duplicates", self.duplicates, get_args(Duplicates))
        one_of("blank_consent", self.blank_consent, get_args(BlankConsent))
        if not isinstance(self.require_consent, bool):
            raise ConfigurationError(
                f"require_consent must be True or False, not {self.require_consent!r}"
            )
        if self.phone_region is not None:
            import phonenumbers  # noqa: PLC0415 - ~15 ms to import; only a region needs it

            region = str(self.phone_region).upper()
            if region not in phonenumbers.SUPPORTED_REGIONS:
                raise ConfigurationError(
                    f"phone_region {self.phone_region!r} is not a region phonenumbers knows; "
                    "use an ISO 3166 code such as 'US' or 'GB'"
                )
            object.__setattr__(self, "phone_region", region)
