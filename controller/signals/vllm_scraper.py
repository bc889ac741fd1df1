"""Scrape ``/metrics`` from many vLLM servers at once: one shared client, a semaphore bounding concurrency,
a deadline per request (not counting the wait for a slot), and one retry when a kept-alive connection was
closed under us. Never raises: each endpoint ends with a snapshot or an error line."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from clocks import Clock
from controller.signals.exposition import ExpositionError, parse_vllm_metrics
from controller.signals.redact import mask_url, scrub
from controller.signals.vllm_snapshot import VllmSnapshot


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    endpoint: str
    snapshot: VllmSnapshot | None = None
    error: str | None = None


def endpoint_base(endpoint: str) -> str:
    """``10.0.0.5:8000`` → ``http://10.0.0.5:8000``; a full URL stays as it is (without a trailing slash)."""
    base = endpoint if "://" in endpoint else f"http://{endpoint}"
    return base.rstrip("/")


class VllmScraper:
    def __init__(self, client: httpx.AsyncClient, clock: Clock, *, timeout: float = 2.0, concurrency: int = 64):
        self._client = client
        self._clock = clock
        self._timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)

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
                response = await self._client.get(url)
                response.raise_for_status()
                return response.text
            except httpx.RemoteProtocolError:
                # The server closed an idle kept-alive connection as we reused it: one fresh try.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def display(endpoint: str) -> str:
    return mask_url(endpoint_base(endpoint))
