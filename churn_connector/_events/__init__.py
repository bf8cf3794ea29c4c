"""The events wing: options → schema → wire (with message ids) → stream → public api."""
