"""The activator: scale-from-zero for HTTP tiers (what KEDA's HTTP add-on interceptor and Knative's
activator do), served by the daemon at ``/activate/<tier>/<path>``.

While a tier has no ready instance, the load balancer sends its requests here. Each one is read (bounded
body), counted as demand (the policy sees it as a waiting request and the daemon ticks at once), held up
to ``max_wait`` (at most ``max_held`` per tier; beyond: 503 with ``Retry-After``, never an unbounded
buffer), then streamed to the first ready instance — token by token for SSE. Once instances are ready the
load balancer routes straight to them, and the activator is out of the path.

A replica that is not the leader answers 503 at once without holding anything, so a load balancer that
lists every replica's activator retries the next one (docs/routing.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from scalectl.serving.activator.gate import HoldLimits, TierGate

log = logging.getLogger("scalectl.activator")

# Headers that belong to one connection, not to the request (RFC 9110 §7.6.1), plus Host (the upstream's own).
HOP_BY_HOP = frozenset(
    b"connection keep-alive proxy-authenticate proxy-authorization te trailer transfer-encoding upgrade host".split()
)
UPSTREAM_HEADER = "x-scalectl-activator"
RETRY_AFTER_S = 30
STANDBY_RETRY_AFTER_S = 1
Observer = Callable[[str, str, float | None], None]  # (tier, outcome, seconds held or None)


def _error(status: int, message: str, retry_after: int | None = None) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The whole body, or None as soon as it would exceed ``limit`` (nothing beyond it is buffered)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _disconnected(request: Request) -> None:
    """Returns when the client goes away (the body is read by now, so only a disconnect can arrive)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class Activator:
    def __init__(
        self,
        *,
        client: httpx.AsyncClient | None = None,
        acting: Callable[[], bool] = lambda: True,
        on_demand: Callable[[str], None] | None = None,
        observe: Observer | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        read_timeout: float = 600.0,
    ):
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(read_timeout, connect=5.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
            trust_env=False,
        )
        self._acting = acting
        self._on_demand = on_demand
        self._observe = observe
        self._monotonic = monotonic
        self._gates: dict[str, TierGate] = {}

    # ---- what the daemon tells it ---------------------------------------------------------------------
    def configure(self, tier: str, limits: HoldLimits) -> None:
        gate = self._gates.get(tier)
        if gate is None or gate.closed:
            self._gates[tier] = TierGate(tier, limits)
        else:
            gate.limits = limits

    def remove(self, tier: str) -> None:
        gate = self._gates.pop(tier, None)
        if gate is not None:
            gate.close()

    def tiers(self) -> list[str]:
        return sorted(self._gates)

    def set_endpoints(self, tier: str, addresses: list[str] | tuple[str, ...]) -> None:
        gate = self._gates.get(tier)
        if gate is not None:
            gate.set_endpoints(tuple(addresses))

    def held(self, tier: str) -> int | None:
        """Requests held for the tier now; None when the tier is not activated here."""
        gate = self._gates.get(tier)
        return None if gate is None else gate.held

    def take_arrivals(self, tier: str) -> int | None:
        gate = self._gates.get(tier)
        return None if gate is None else gate.take_arrivals()

    async def aclose(self) -> None:
        for gate in self._gates.values():
            gate.close()
        if self._owns_client:
            await self._client.aclose()

    # ---- a request ------------------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        tier = request.path_params["tier"]
        gate = self._gates.get(tier)
        if gate is None or gate.closed:
            return self._done(tier, "unknown_tier", None, _error(404, f"tier {tier!r} is not activated here"))
        if not self._acting():
            reply = _error(503, "this replica is a standby; the leader activates tiers", STANDBY_RETRY_AFTER_S)
            return self._done(tier, "standby", None, reply)
        body = await _read_body(request, gate.limits.max_body_bytes)
        if body is None:
            limit = gate.limits.max_body_bytes
            reply = _error(413, f"request body over {limit} bytes (the tier's activator.max_body_bytes)")
            return self._done(tier, "too_large", None, reply)
        started = self._monotonic()
        if not gate.admit():
            reply = _error(503, f"tier {tier} is starting and already holds {gate.held} requests", RETRY_AFTER_S)
            return self._done(tier, "full", None, reply)
        if gate.endpoints:
            return await self._forward(gate, request, body, None)
        try:
            if self._on_demand is not None:
                self._on_demand(tier)
            outcome = await self._wait(gate, request)
        finally:
            gate.release()
        held = self._monotonic() - started
        if outcome == "gone":
            return self._done(tier, "client_gone", held, Response(status_code=499))
        if outcome == "timeout":
            wait = gate.limits.max_wait_s
            reply = _error(503, f"tier {tier}: no instance ready within {wait:g}s", RETRY_AFTER_S)
            return self._done(tier, "timed_out", held, reply)
        return await self._forward(gate, request, body, held)

    async def _wait(self, gate: TierGate, request: Request) -> str:
        ready = asyncio.ensure_future(gate.wait_ready(gate.limits.max_wait_s))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({ready, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (ready, gone):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if ready.done() and not ready.cancelled() and ready.result():
            return "ready"
        return "gone" if gone.done() and not gone.cancelled() else "timeout"

    async def _forward(self, gate: TierGate, request: Request, body: bytes, held: float | None) -> Response:
        """Send to the next ready instance; a connection refused (nothing sent yet) tries the next one."""
        path = request.path_params.get("path", "")
        query = request.url.query
        target = "/" + path + (f"?{query}" if query else "")
        headers = [(k, v) for k, v in request.headers.raw if k.lower() not in HOP_BY_HOP]
        problem = "no ready instance"
        for address in gate.next_endpoints():
            upstream_request = self._client.build_request(
                request.method, f"http://{address}{target}", headers=headers, content=body
            )
            try:
                upstream = await self._client.send(upstream_request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                problem = f"{address}: {type(exc).__name__}"
                continue
            except httpx.HTTPError as exc:
                reply = _error(502, f"tier {gate.tier}: {address} failed: {type(exc).__name__}")
                return self._done(gate.tier, "upstream_error", held, reply)
            closing = BackgroundTask(upstream.aclose)
            response = StreamingResponse(_relay(upstream, gate.tier), upstream.status_code, background=closing)
            response.raw_headers = [(k, v) for k, v in upstream.headers.raw if k.lower() not in HOP_BY_HOP]
            response.raw_headers.append((UPSTREAM_HEADER.encode(), f"{address}; held={held or 0.0:.3f}s".encode()))
            return self._done(gate.tier, "proxied", held, response)
        return self._done(gate.tier, "upstream_error", held, _error(502, f"tier {gate.tier}: {problem}"))

    def _done(self, tier: str, outcome: str, held: float | None, response: Response) -> Response:
        if self._observe is not None:
            self._observe(tier, outcome, held)
        return response


async def _relay(upstream: httpx.Response, tier: str) -> AsyncIterator[bytes]:
    """The upstream's bytes as they arrive (SSE tokens included); a cut upstream ends the response."""
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    except httpx.HTTPError as exc:
        log.warning("tier %s: the instance cut a response short: %s", tier, type(exc).__name__)
