"""The activator's rules, on in-process ASGI apps (no sockets): hold at zero, hand on when ready, refuse at
the bounds with Retry-After, count demand, step aside on a standby."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.serving.activator import Activator, HoldLimits


def upstream_app(seen: list[tuple[str, str, bytes, str | None]]) -> Starlette:
    """A stand-in instance that echoes what it received."""

    async def echo(request: Request) -> Response:
        body = await request.body()
        seen.append(
            (
                request.method,
                request.url.path + ("?" + request.url.query if request.url.query else ""),
                body,
                request.headers.get("x-custom"),
            )
        )
        return JSONResponse({"served_by": request.url.netloc, "path": request.url.path}, headers={"x-up": "1"})

    return Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])])


class World:
    def __init__(self, limits: HoldLimits = HoldLimits(max_held=3, max_wait_s=5.0, max_body_bytes=2048)):
        self.seen: list[tuple[str, str, bytes, str | None]] = []
        self.woken: list[str] = []
        self.outcomes: Counter[str] = Counter()
        self.leader = True
        upstream = httpx.AsyncClient(transport=httpx.ASGITransport(app=upstream_app(self.seen)))
        self.activator = Activator(
            client=upstream,
            acting=lambda: self.leader,
            on_demand=self.woken.append,
            observe=lambda tier, outcome, held: self.outcomes.update([outcome]),
        )
        self.activator.configure("chat", limits)
        app = Starlette(routes=[Route("/activate/{tier}/{path:path}", self.activator.handle, methods=["GET", "POST"])])
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://lb")

    async def post(self, path: str = "/activate/chat/v1/chat/completions", **kw: object) -> httpx.Response:
        return await self.client.post(path, **kw)  # type: ignore[arg-type]

    async def until_held(self, n: int) -> None:
        for _ in range(500):  # bounded
            if self.activator.held("chat") == n:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"held {self.activator.held('chat')}, wanted {n}")


async def test_a_request_at_zero_is_held_counted_and_handed_to_the_first_ready_instance() -> None:
    w = World()
    pending = asyncio.ensure_future(w.post(json={"model": "m"}, headers={"x-custom": "kept"}, params={"a": "1"}))
    await w.until_held(1)
    assert w.woken == ["chat"]  # the daemon is asked to tick at once
    assert w.seen == []
    w.activator.set_endpoints("chat", ["10.0.0.7:8000"])
    reply = await asyncio.wait_for(pending, 5)
    assert reply.status_code == 200
    assert reply.json()["path"] == "/v1/chat/completions"
    assert reply.headers["x-up"] == "1"
    assert reply.headers["x-scalectl-activator"].startswith("10.0.0.7:8000; held=")
    (method, path, body, custom) = w.seen[0]
    assert (method, path, custom) == ("POST", "/v1/chat/completions?a=1", "kept")
    assert body == b'{"model":"m"}'
    assert w.activator.held("chat") == 0
    assert w.activator.take_arrivals("chat") == 1
    assert w.outcomes == Counter({"proxied": 1})


async def test_with_an_instance_ready_the_request_goes_on_without_waiting() -> None:
    w = World()
    w.activator.set_endpoints("chat", ["10.0.0.7:8000"])
    reply = await w.post(json={})
    assert reply.status_code == 200
    assert w.woken == []  # nothing held: no need to wake anybody
    assert reply.headers["x-scalectl-activator"].endswith("held=0.000s")


async def test_over_the_hold_bound_answers_503_with_retry_after_and_holds_nothing_more() -> None:
    w = World()
    held = [asyncio.ensure_future(w.post(json={})) for _ in range(3)]
    await w.until_held(3)
    refused = await w.post(json={})
    assert refused.status_code == 503
    assert int(refused.headers["retry-after"]) > 0
    assert "already holds 3" in refused.json()["error"]
    assert w.activator.held("chat") == 3
    w.activator.set_endpoints("chat", ["10.0.0.7:8000"])
    assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200, 200]
    assert w.outcomes == Counter({"proxied": 3, "full": 1})
    assert w.activator.take_arrivals("chat") == 4


async def test_a_request_not_served_within_max_wait_gets_503_and_is_no_longer_held() -> None:
    w = World(HoldLimits(max_held=3, max_wait_s=0.2, max_body_bytes=2048))
    reply = await w.post(json={})
    assert reply.status_code == 503
    assert "no instance ready within 0.2s" in reply.json()["error"]
    assert "retry-after" in reply.headers
    assert w.activator.held("chat") == 0
    assert w.outcomes == Counter({"timed_out": 1})


async def test_a_body_over_the_limit_is_refused_before_it_is_held() -> None:
    w = World()
    reply = await w.post(content=b"x" * 4096)
    assert reply.status_code == 413
    assert "max_body_bytes" in reply.json()["error"]
    assert w.activator.held("chat") == 0 and w.woken == []


async def test_a_standby_answers_503_at_once_so_the_balancer_tries_the_next_replica() -> None:
    w = World()
    w.leader = False
    reply = await w.post(json={})
    assert reply.status_code == 503 and reply.headers["retry-after"] == "1"
    assert w.activator.take_arrivals("chat") == 0  # not counted: the leader counts it when it gets there
    assert w.outcomes == Counter({"standby": 1})


async def test_an_unknown_tier_is_404_and_a_removed_tier_releases_its_held_requests() -> None:
    w = World()
    assert (await w.post("/activate/other/v1/models")).status_code == 404
    pending = asyncio.ensure_future(w.post(json={}))
    await w.until_held(1)
    w.activator.remove("chat")
    reply = await asyncio.wait_for(pending, 5)
    assert reply.status_code == 503
    assert w.activator.held("chat") is None


class OneChunk(httpx.AsyncByteStream):
    def __init__(self, data: bytes):
        self.data = data

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        yield self.data


async def test_a_refused_connection_falls_through_to_the_next_instance() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.host)
        if request.url.host == "10.0.0.1":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, stream=OneChunk(b'{"ok": true}'))  # streamed, as a real socket is

    activator = Activator(client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    activator.configure("chat", HoldLimits())
    activator.set_endpoints("chat", ["10.0.0.1:8000", "10.0.0.2:8000"])
    app = Starlette(routes=[Route("/activate/{tier}/{path:path}", activator.handle, methods=["POST"])])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://lb") as client:
        replies = [await client.post("/activate/chat/x", json={}) for _ in range(4)]
    assert [r.status_code for r in replies] == [200] * 4
    assert calls.count("10.0.0.2") == 4  # every request ended on the instance that answers


@pytest.mark.parametrize("held_before", [0, 2])
async def test_arrivals_are_taken_once(held_before: int) -> None:
    w = World()
    tasks = [asyncio.ensure_future(w.post(json={})) for _ in range(held_before)]
    await w.until_held(held_before)
    assert w.activator.take_arrivals("chat") == held_before
    assert w.activator.take_arrivals("chat") == 0
    w.activator.set_endpoints("chat", ["10.0.0.7:8000"])
    await asyncio.gather(*tasks)
