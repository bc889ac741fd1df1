"""Scrape ``/metrics`` from many vLLM servers at once: one shared client, a semaphore bounding concurrency,
a deadline per request (not counting the wait for a slot), and one retry when a kept-alive connection was
closed under us. Never raises: each endpoint ends with a snapshot or an error line."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from scalectl.clocks import Clock
from scalectl.sources.exposition import ExpositionError, parse_vllm_metrics
from scalectl.sources.redact import mask_url, scrub
from scalectl.sources.vllm_snapshot import VllmSnapshot


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    endpoint: str
    snapshot: VllmSnapshot | None = None
    error: str | None = None


def endpoint_base(endpoint: str) -> str:
    """``10.0.0.5:8000`` → ``http://10.0.0.5:8000``; a full URL stays as it is (without a trailing slash)."""
    base = endpoint if "://" in endpoint else f"http://{endpoint}"
    return base.rstrip("/")


_URLS_KEPT = 50_000
_HEADERS = {"Accept": "text/plain", "Accept-Encoding": "gzip", "User-Agent": "scalectl"}


class VllmScraper:
    """``transport``, when given, is the shared client's own transport: scrapes then skip the client's
    cookie, auth and redirect layers, which /metrics does not use and which cost more CPU than the request
    itself at thousands of endpoints per tick."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        clock: Clock,
        *,
        timeout: float = 2.0,
        concurrency: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self._client = client
        self._transport = transport
        self._clock = clock
        self._timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)
        self._timeouts = httpx.Timeout(timeout).as_dict()
        self._urls: dict[str, httpx.URL] = {}  # parsed once per endpoint, not on every scrape

    async def scrape(self, endpoints: Sequence[str], path: str = "/metrics") -> list[ScrapeResult]:
        return list(await asyncio.gather(*(self._one(e, path) for e in endpoints)))

    async def _one(self, endpoint: str, path: str) -> ScrapeResult:
        url = endpoint_base(endpoint) + path
        async with self._slots:
            try:
                async with asyncio.timeout(self._timeout):
                    text = await self._get(url)
            except TimeoutError:
                return ScrapeResult(endpoint, error=f"no answer within {self._timeout:g}s")
            except httpx.HTTPStatusError as exc:
                return ScrapeResult(endpoint, error=f"{path} answered HTTP {exc.response.status_code}")
            except (httpx.HTTPError, OSError) as exc:
                detail = str(exc) or type(exc).__name__
                return ScrapeResult(endpoint, error=f"{type(exc).__name__}: {scrub(detail, endpoint)}")
            read_at = self._clock.now()
        try:
            return ScrapeResult(endpoint, snapshot=parse_vllm_metrics(text, read_at))
        except ExpositionError as exc:
            return ScrapeResult(endpoint, error=f"bad {path}: {exc}")

    async def _get(self, url: str) -> str:
        for attempt in (1, 2):
            try:
                if self._transport is None:
                    response = await self._client.get(url, headers=_HEADERS)
                else:
                    parsed = self._urls.get(url)
                    if parsed is None:
                        if len(self._urls) >= _URLS_KEPT:  # endpoints come and go: start again, as a cache may
                            self._urls.clear()
                        parsed = self._urls[url] = httpx.URL(url)
                    request = httpx.Request("GET", parsed, headers=_HEADERS, extensions={"timeout": self._timeouts})
                    response = await self._transport.handle_async_request(request)
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
                    response.request = request
                response.raise_for_status()
                return _text(response)
            except httpx.RemoteProtocolError:
                # The server closed an idle kept-alive connection as we reused it: one fresh try.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def _text(response: httpx.Response) -> str:
    """``response.text`` without its charset detection when the body has no charset named (the text format
    is UTF-8): working out the encoding cost as much as reading the headers."""
    if "charset" in response.headers.get("content-type", "").lower():
        return response.text
    return response.content.decode("utf-8", errors="replace")


def display(endpoint: str) -> str:
    return mask_url(endpoint_base(endpoint))
