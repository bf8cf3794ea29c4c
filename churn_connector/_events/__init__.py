"""The events wing: schema → stream (validation, the wire, de-duplication) → public api."""
