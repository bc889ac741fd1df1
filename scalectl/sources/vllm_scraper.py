"""Scrape ``/metrics`` from many vLLM servers at once: a plain GET each (``plain_get``) or requests through a
client given, a semaphore bounding concurrency, a deadline per request (not counting the wait for a slot),
and, through a client, one retry when a kept-alive connection was closed under us. Never raises: each
endpoint ends with a snapshot or an error line."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from scalectl.clocks import Clock
from scalectl.sources import plain_get
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
# Plain scrapes ask for the body as it is: compressing 40 KiB costs the serving process (vLLM's API server,
# often its busiest part) more than sending it, and uncompressing costs ours; 8 KB/s a server is no load.
_PLAIN_HEADERS = {"Accept": "text/plain", "User-Agent": "scalectl"}


class VllmScraper:
    """``plain``: each scrape is one GET on its own connection (``plain_get``), not a request through
    ``client``: httpx's models, httpcore's pools and asyncio's streams cost more CPU than the request itself
    at thousands of endpoints per tick. The daemon scrapes so; a client given by the caller (tests, the
    serving hooks) is used as it is."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        clock: Clock,
        *,
        timeout: float = 2.0,
        concurrency: int = 64,
        plain: bool = False,
    ):
        self._client = client
        self._plain = plain
        self._clock = clock
        self._timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)
        self._tls: ssl.SSLContext | None = None  # one for every https endpoint: building one costs milliseconds
        self._targets: dict[str, plain_get.Target] = {}  # worked out once per endpoint, not on every scrape

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
            except _HttpStatus as exc:
                return ScrapeResult(endpoint, error=f"{path} answered HTTP {exc.status}")
            except (httpx.HTTPError, plain_get.GetError, OSError) as exc:
                detail = str(exc) or type(exc).__name__
                return ScrapeResult(endpoint, error=f"{type(exc).__name__}: {scrub(detail, endpoint)}")
            read_at = self._clock.now()
        try:
            return ScrapeResult(endpoint, snapshot=parse_vllm_metrics(text, read_at))
        except ExpositionError as exc:
            return ScrapeResult(endpoint, error=f"bad {path}: {exc}")

    async def _get(self, url: str) -> str:
        if self._plain:
            return await self._get_plain(url)
        for attempt in (1, 2):
            try:
                response = await self._client.get(url, headers=_HEADERS)
                response.raise_for_status()
                return _text(response)
            except httpx.RemoteProtocolError:
                # The server closed an idle kept-alive connection as we reused it: one fresh try.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _get_plain(self, url: str) -> str:
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) >= _URLS_KEPT:  # endpoints come and go: start again, as a cache may
                self._targets.clear()
            target = self._targets[url] = plain_get.Target.of(url, _PLAIN_HEADERS)
        if target.tls and self._tls is None:
            self._tls = ssl.create_default_context()
        answer = await plain_get.get(target, self._tls)
        if not 200 <= answer.status < 300:
            raise _HttpStatus(answer.status)
        return answer.text()


class _HttpStatus(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _text(response: httpx.Response) -> str:
    """``response.text`` without its charset detection when the body has no charset named (the text format
    is UTF-8): working out the encoding cost as much as reading the headers."""
    if "charset" in response.headers.get("content-type", "").lower():
        return response.text
    return response.content.decode("utf-8", errors="replace")


def display(endpoint: str) -> str:
    return mask_url(endpoint_base(endpoint))
