"""One-off events: ``track()`` for webhooks, services and scripts (``POST /v1/events/track``),
the buffered tracker and its durable spool, and the async client."""
