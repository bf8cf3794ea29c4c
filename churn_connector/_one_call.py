"""The one-call forms: ``cc.send_events(data, base_url, api_key, ...)``, ``cc.identify`` and
``cc.track``, each a :class:`Client` made for the call and closed after it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Unpack

from ._client import Client
from ._core import ClientConfig, DataSource, IdFormat, Secret, as_secret
from ._keywords import IdentifyOptions, SendEventsOptions
from ._results import SendResult
from ._track import PlanSource, TrackResult

if TYPE_CHECKING:
    import requests

__all__ = ["identify", "send_events", "track"]


def send_events(
    data: DataSource,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    *,
    config: ClientConfig | None = None,
    session: requests.Session | None = None,
    **options: Unpack[SendEventsOptions],
) -> SendResult:
    """One-call form: ``Client(base_url, api_key, config=config, session=session)
    .send_events(data, ...)``; a dry run needs no base URL or key."""
    api_key = as_secret(api_key)
    if config is None and options.get("dry_run"):
        config = ClientConfig.create(base_url, api_key, dry_run=True)
    return Client(base_url, api_key, config=config, session=session).send_events(data, **options)


def identify(
    data: DataSource,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    *,
    config: ClientConfig | None = None,
    session: requests.Session | None = None,
    **options: Unpack[IdentifyOptions],
) -> SendResult:
    """One-call form: ``Client(base_url, api_key, config=config, session=session)
    .identify(data, ...)``; a dry run needs no base URL or key."""
    api_key = as_secret(api_key)
    if config is None and options.get("dry_run"):
        config = ClientConfig.create(base_url, api_key, dry_run=True)
    return Client(base_url, api_key, config=config, session=session).identify(data, **options)


def track(
    external_user_id: str | int,
    event_type: str,
    *,
    occurred_at: Any = None,
    properties: Mapping[str, Any] | str | None = None,
    context: Mapping[str, Any] | str | None = None,
    message_id: str | None = None,
    now: Any = None,
    naive_timezone: str | None = None,
    namespace: str | None = None,
    id_format: IdFormat = "v2",
    plan: PlanSource | None = None,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    config: ClientConfig | None = None,
) -> TrackResult:
    """One-call form: ``Client(base_url, api_key, config=config).track(...)`` (a script
    that sends one event; a service keeps one Client and calls its ``track``)."""
    client = Client(base_url, as_secret(api_key), config=config)
    try:
        return client.track(
            external_user_id,
            event_type,
            occurred_at=occurred_at,
            properties=properties,
            context=context,
            message_id=message_id,
            now=now,
            naive_timezone=naive_timezone,
            namespace=namespace,
            id_format=id_format,
            plan=plan,
        )
    finally:
        client.close()
