"""The sync tests' sources (``sources``)."""

from tests.sync.sources import source

__all__ = ["source"]
