"""The identities wing: schema → stream (validation, identify bodies, repeated users) → api."""

from __future__ import annotations

from .api import identities_to_wire, validate_identities
from .schema import identities_schema
from .stream import IdentityStream

__all__ = [
    "IdentityStream",
    "identities_schema",
    "identities_to_wire",
    "validate_identities",
]
