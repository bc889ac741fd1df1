"""An httpx transport that keeps one small connection pool per origin.

httpcore's single pool walks every connection on each request, which turns a scrape of thousands of
servers quadratic; a dict of per-origin pools keeps each request O(1). Shared TLS context: building one
per origin costs tens of milliseconds each."""

from __future__ import annotations

import importlib.util
import ssl
import sys

import httpcore
import httpx

from scalectl.sources.asyncio_backend import AsyncioBackend

# httpcore asks for sniffio each time it sets up a lock or an event (several per request) and falls back to
# asyncio when it is missing. Python does not remember a failed import: without sniffio installed (it is not
# a dependency) every ask searched sys.path again, a third of a scrape's CPU. None in sys.modules makes that
# import fail at once, as it would anyway.
if importlib.util.find_spec("sniffio") is None:
    sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]


class PerOriginTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, connections_per_origin: int = 2, keepalive_expiry: float = 4.0):
        self._limits = httpx.Limits(
            max_connections=connections_per_origin,
            max_keepalive_connections=connections_per_origin,
            keepalive_expiry=keepalive_expiry,  # below uvicorn's (and vLLM's) 5 s keep-alive timeout
        )
        self._ssl: ssl.SSLContext | None = None
        self._backend = AsyncioBackend()
        self._pools: dict[tuple[str, str, int | None], httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = (request.url.scheme, request.url.host, request.url.port)
        pool = self._pools.get(key)
        if pool is None:
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            pool = self._pools[key] = httpx.AsyncHTTPTransport(verify=self._ssl, limits=self._limits)
            # httpx builds its pool with httpcore's anyio backend; swap in the lean asyncio one.
            pool._pool = httpcore.AsyncConnectionPool(
                ssl_context=self._ssl,
                max_connections=self._limits.max_connections,
                max_keepalive_connections=self._limits.max_keepalive_connections,
                keepalive_expiry=self._limits.keepalive_expiry,
                network_backend=self._backend,
            )
        return await pool.handle_async_request(request)

    async def forget(self, keep: set[tuple[str, str, int | None]]) -> None:
        """Close pools of origins no longer scraped."""
        for key in [k for k in self._pools if k not in keep]:
            await self._pools.pop(key).aclose()

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.aclose()
