"""``cc.AsyncClient`` inside a real ASGI server (uvicorn) receiving concurrent webhook posts,
its handlers calling ``await client.track`` and a tracker against a sandbox; cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
import uvicorn
from fastapi import FastAPI, Request

import churn_connector as cc

pytestmark = pytest.mark.e2e


def webhook_app(base_url: str, api_key: str) -> FastAPI:
    """A small service: one endpoint sends each webhook now, one queues it in a tracker."""
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with cc.AsyncClient(base_url, api_key) as client, client.tracker() as tracker:
            state["client"], state["tracker"] = client, tracker
            yield

    app = FastAPI(lifespan=lifespan)

    @app.post("/hooks/now")
    async def now(request: Request) -> dict[str, str]:
        hook = await request.json()
        result = await state["client"].track(
            hook["customer"],
            hook["type"],
            message_id=hook["id"],
            occurred_at=hook["created"],
            properties=hook["data"],
        )
        return {"message_id": result.message_id}

    @app.post("/hooks/queued")
    async def queued(request: Request) -> dict[str, str]:
        hook = await request.json()
        handle = await state["tracker"].track(
            hook["customer"],
            hook["type"],
            message_id=hook["id"],
            occurred_at=hook["created"],
            properties=hook["data"],
        )
        return {"message_id": handle.message_id}

    return app


@pytest.fixture
def served(sandbox: cc.Sandbox) -> Iterator[str]:
    """The webhook app under uvicorn on a free loopback port; its base URL."""
    config = uvicorn.Config(
        webhook_app(sandbox.base_url, sandbox.api_key),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        ws="none",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=20)
    assert not thread.is_alive()


def test_concurrent_webhooks_are_each_stored_once(
    served: str, sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    hooks: list[dict[str, Any]] = [
        {
            "id": f"evt_{i}",
            "created": (now - pd.Timedelta(seconds=i)).isoformat(),
            "type": "invoice_paid",
            "customer": f"cus_{i % 5}",
            "data": {"amount": i * 100},
        }
        for i in range(40)
    ]
    posts = [(path, hook) for hook in hooks for path in ("/hooks/now", "/hooks/queued")]

    def deliver(item: tuple[str, dict[str, Any]]) -> str:
        answer = httpx.post(served + item[0], json=item[1], timeout=20)
        answer.raise_for_status()
        return str(answer.json()["message_id"])

    with ThreadPoolExecutor(16) as pool:  # the provider posts each webhook to both, at once
        ids = list(pool.map(deliver, posts))
    assert ids == [hook["id"] for hook in hooks for _ in range(2)]
    deadline = time.monotonic() + 20
    while sandbox.stats()["stored"] + sandbox.stats()["duplicates"] < len(posts):
        assert time.monotonic() < deadline, sandbox.stats()
        time.sleep(0.05)
    events = sandbox.events()
    assert sorted(events["message_id"]) == sorted(hook["id"] for hook in hooks)
    assert events.set_index("message_id")["properties"].to_dict()["evt_7"] == {"amount": 700}


def test_the_async_client_sends_the_bytes_of_the_thread_client(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    values: dict[str, Any] = {"properties": {"seats": 3.0}, "occurred_at": now, "now": now}
    sync = cc.Client(sandbox.base_url, sandbox.api_key).track("u1", "seat_added", **values)

    async def send() -> cc.TrackResult:
        async with cc.AsyncClient(sandbox.base_url, sandbox.api_key) as client:
            return await client.track("u1", "seat_added", **values)

    assert asyncio.run(send()).message_id == sync.message_id
    assert sandbox.stats()["duplicates"] == 1


def test_a_cancelled_close_leaves_no_event_unaccounted(tmp_path: Path) -> None:
    async def run(base_url: str, api_key: str) -> tuple[cc.FlushReport, list[bool]]:
        async with cc.AsyncClient(base_url, api_key) as client:
            tracker = client.tracker(tmp_path / "spool.sqlite", max_concurrency=1)
            handles = [
                await tracker.track("u1", "page_view", properties={"i": i}) for i in range(5)
            ]
            await asyncio.sleep(0.3)  # the first request is in flight on the slow API
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await tracker.flush()
            report = await tracker.aclose(timeout=0)
            return report, [h.done() for h in handles]

    with cc.Sandbox(latency=2.0) as slow:
        report, done = asyncio.run(run(slow.base_url, slow.api_key))
    assert all(done)
    assert report.n_delivered + len(report.undelivered) == 5
    assert report.undelivered  # closed with a request in flight on a 2 s API
    assert all(u.state == "failed" for u in report.undelivered)
    with cc.Sandbox() as fast:
        tracker = cc.Client(fast.base_url, fast.api_key).tracker(tmp_path / "spool.sqlite")
        tracker.close()
        # what the first tracker could not confirm was kept and is delivered now
        assert len(fast.events()) == len(report.undelivered)
