"""The identities wing: schema → stream (validation, identify bodies, repeated users) → api."""
