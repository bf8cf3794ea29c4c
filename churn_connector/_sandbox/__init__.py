"""A strict local stand-in for the hosted ingestion API (a test double, not the service).

``Sandbox`` serves the contract's three endpoints over real HTTP on loopback, validates every
request strictly, deduplicates events by ``context.$message_id`` per API key, merges
identities, stores everything in SQLite and can inject latency, 5xx, 429, stalls and dropped
responses.
"""

from ._cli import main
from ._core import Sandbox, generate_test_key
from ._faults import Fault

__all__ = ["Fault", "Sandbox", "generate_test_key", "main"]
