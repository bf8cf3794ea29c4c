"""The identities wing: options → channels → schema → wire → duplicates → stream → api."""
