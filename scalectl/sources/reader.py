"""The daemon's signal source: Celery brokers, vLLM ``/metrics`` and Prometheus, read concurrently per tier.

Rules (see docs/signals.md): a failed, unreachable or unparseable source gives None for its figures (never
0) and an entry in ``TierReading.errors``; a failing source rests with exponential backoff instead of being
hit every tick; when some of a tier's endpoints answer, figures come from those and each silent one is an
error entry; when none answer, the vLLM figures are unknown.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import httpx

from scalectl.clocks import Clock
from scalectl.policies.types import Signals
from scalectl.sources.backoff import Backoff
from scalectl.sources.celery_rabbitmq import RabbitAmqpReader, RabbitManagementReader
from scalectl.sources.celery_redis import RedisQueueReader
from scalectl.sources.http_pool import PerOriginTransport
from scalectl.sources.prometheus import PrometheusError, PrometheusSource
from scalectl.sources.queue_counts import BrokerError, QueueCounts
from scalectl.sources.reading import TierReading
from scalectl.sources.redact import mask_url
from scalectl.sources.spec import MetricsSource, QueueSource, SignalsSpec
from scalectl.sources.vllm_scraper import VllmScraper, display
from scalectl.sources.vllm_window import VllmFigures, VllmWindow

BROKER_URL_ENV = "SCALECTL_BROKER_URL"
DEFAULT_METRICS = MetricsSource()


class _QueueReader(Protocol):
    async def read(self, queues: Sequence[str]) -> QueueCounts: ...
    async def aclose(self) -> None: ...


@dataclass
class _TierState:
    window: VllmWindow
    errors: Counter[str] = field(default_factory=Counter)
    details: dict[str, Any] = field(default_factory=dict)
    last_prometheus_read: float | None = None


@dataclass(frozen=True, slots=True)
class _Part:
    """What one source contributed to a tier's reading."""

    values: Mapping[str, float | None] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)
    failed: tuple[str, ...] = ()  # sources that failed on this tick (counted)
    source: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)


class SignalReader:
    """Implements ``SignalSource``. One per daemon; ``aclose()`` on shutdown."""

    def __init__(
        self,
        clock: Clock,
        *,
        timeout: float = 2.0,
        concurrency: int = 64,
        backoff_base: float = 2.0,
        backoff_cap: float = 10.0,  # a source back from an outage is read again within a tick or two
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ):
        self._clock = clock
        self._timeout = timeout
        self._env = os.environ if env is None else env
        self._owns_client = client is None
        transport = PerOriginTransport() if client is None else None
        self._client = client or httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False)
        # Its own client: scrapes go plain (``plain_get``); a client given (tests) is used as it is.
        self._scraper = VllmScraper(self._client, clock, timeout=timeout, concurrency=concurrency, plain=client is None)
        self._prometheus = PrometheusSource(self._client, timeout=timeout)
        self._backoff = Backoff(clock, base=backoff_base, cap=backoff_cap)
        self._brokers: dict[tuple[str, str], _QueueReader] = {}
        self._tiers: dict[str, _TierState] = {}

    # -- public ------------------------------------------------------------------------------------
    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        metrics = spec.metrics or DEFAULT_METRICS
        state = self._tier(tier, metrics.window)
        all_endpoints = list(dict.fromkeys([*endpoints, *spec.endpoints]))
        queue_part, metrics_part = await asyncio.gather(
            self._read_queue(spec.queue), self._read_metrics(state, spec, metrics, all_endpoints)
        )
        for source in (*queue_part.failed, *metrics_part.failed):
            state.errors[source] += 1
        values: dict[str, float | None] = {**queue_part.values, **metrics_part.values}
        sources = {k: p.source for p in (queue_part, metrics_part) for k in p.values if p.source}
        state.details = {**queue_part.details, **metrics_part.details}
        return TierReading(
            signals=Signals.from_mapping(values),
            read_at=self._clock.now(),
            errors={**queue_part.errors, **metrics_part.errors},
            sources=sources,
        )

    def error_counts(self, tier: str) -> dict[str, int]:
        """Failures per source for a tier since the reader started (for ``scalectl describe tier``)."""
        state = self._tiers.get(tier)
        return dict(state.errors) if state else {}

    def details(self, tier: str) -> dict[str, Any]:
        """The last reading's extra figures: KV max, prefix-cache hit rate, preemptions, per-queue counts."""
        state = self._tiers.get(tier)
        return dict(state.details) if state else {}

    async def aclose(self) -> None:
        brokers, self._brokers = list(self._brokers.values()), {}
        for broker in brokers:
            await broker.aclose()
        if self._owns_client:
            await self._client.aclose()

    # -- tiers -------------------------------------------------------------------------------------
    def _tier(self, tier: str, window: float) -> _TierState:
        state = self._tiers.get(tier)
        if state is None or state.window.window != window:
            state = self._tiers[tier] = _TierState(VllmWindow(window), errors=state.errors if state else Counter())
        return state

    # -- queue -------------------------------------------------------------------------------------
    def _broker_url(self, queue: QueueSource) -> str | None:
        if queue.broker_url:
            return queue.broker_url
        if queue.broker_url_env:
            return self._env.get(queue.broker_url_env) or None
        return self._env.get(BROKER_URL_ENV) or None

    def _management_url(self, queue: QueueSource) -> str | None:
        if queue.management_url:
            return queue.management_url
        if queue.management_url_env:
            return self._env.get(queue.management_url_env) or None
        return None

    def _broker(self, url: str, queue: QueueSource) -> _QueueReader:
        management = self._management_url(queue)
        key = (url, f"{queue.transport_options.model_dump_json()}|{management}")
        reader: _QueueReader | None = self._brokers.get(key)
        if reader is None:
            scheme = url.split("://", 1)[0].lower()
            if scheme in ("redis", "rediss", "unix"):
                reader = RedisQueueReader(url, queue.transport_options, timeout=self._timeout)
            elif scheme in ("amqp", "amqps", "pyamqp") and management:
                reader = _Managed(RabbitManagementReader(url, management, self._client, timeout=self._timeout))
            elif scheme in ("amqp", "amqps", "pyamqp"):
                reader = RabbitAmqpReader(url, timeout=self._timeout)
            else:
                raise BrokerError(f"{mask_url(url)}: unsupported broker scheme {scheme!r}; use redis:// or amqp://")
            self._brokers[key] = reader
        return reader

    async def _read_queue(self, queue: QueueSource | None) -> _Part:
        if queue is None:
            return _Part()
        unknown = {"queue_depth": None, "in_flight": None}
        url = self._broker_url(queue)
        if url is None:
            where = f"${queue.broker_url_env}" if queue.broker_url_env else f"queue.broker_url or ${BROKER_URL_ENV}"
            return _Part(unknown, {"queue": f"no broker URL: set {where}"}, ("queue",))
        backoff_key = f"broker {url}"
        if not self._backoff.ready(backoff_key):
            return _Part(unknown, {"queue": self._backoff.resting(backoff_key)})
        try:
            counts = await self._broker(url, queue).read(queue.queues)
        except BrokerError as exc:
            self._backoff.failure(backoff_key, str(exc), f"broker {mask_url(url)}")
            return _Part(unknown, {"queue": str(exc)}, ("queue",))
        self._backoff.success(backoff_key, f"broker {mask_url(url)}")
        errors = {"queue": "; ".join(counts.notes)} if counts.notes and counts.in_flight_total is None else {}
        return _Part(
            {"queue_depth": counts.depth, "in_flight": counts.in_flight_total},
            errors,
            source=f"celery {mask_url(url)} ({', '.join(queue.queues)})",
            details={
                "queues": {q: {"pending": counts.pending[q], "in_flight": counts.in_flight[q]} for q in counts.pending}
            },
        )

    # -- metrics -----------------------------------------------------------------------------------
    async def _read_metrics(
        self, state: _TierState, spec: SignalsSpec, metrics: MetricsSource, endpoints: list[str]
    ) -> _Part:
        if metrics.kind == "prometheus":
            return await self._read_prometheus(state, spec, metrics)
        if spec.metrics is None and not endpoints:
            return _Part()
        state.window.forget_except(endpoints)
        due = [e for e in endpoints if self._backoff.ready(f"vllm {e}")]
        errors: dict[str, str] = {
            f"vllm {display(e)}": self._backoff.resting(f"vllm {e}") for e in endpoints if e not in due
        }
        failed: list[str] = []
        answering: list[str] = []
        for result in await self._scraper.scrape(due, metrics.path):
            key, name = f"vllm {result.endpoint}", f"vllm {display(result.endpoint)}"
            if result.snapshot is None:
                self._backoff.failure(key, result.error or "failed", name)
                errors[name] = result.error or "failed"
                failed.append(name)
                continue
            self._backoff.success(key, name)
            state.window.add(result.endpoint, result.snapshot)
            answering.append(result.endpoint)
            if result.snapshot.problems:
                errors[name] = "; ".join(result.snapshot.problems)
                failed.append(name)
        figures = state.window.figures(answering)
        source = f"vllm /metrics ({len(answering)} of {len(endpoints)} endpoints, window {metrics.window:g}s)"
        return _Part(_signal_values(figures), errors, tuple(failed), source, _extra(figures))

    async def _read_prometheus(self, state: _TierState, spec: SignalsSpec, metrics: MetricsSource) -> _Part:
        url = metrics.prometheus_url or ""
        backoff_key = f"prometheus {url}"
        unknown = _signal_values(VllmFigures())
        if not self._backoff.ready(backoff_key):
            return _Part(unknown, {"prometheus": self._backoff.resting(backoff_key)})
        now = self._clock.now()
        try:
            result = await self._prometheus.read(metrics, now=now, stale_after=spec.stale_after)
        except PrometheusError as exc:
            self._backoff.failure(backoff_key, str(exc), f"prometheus {mask_url(url)}")
            return _Part(unknown, {"prometheus": str(exc)}, ("prometheus",))
        if result.all_failed:  # nothing answered: treat the server as down
            first = next(iter(result.errors.values()))
            self._backoff.failure(backoff_key, first, f"prometheus {mask_url(url)}")
            return _Part(unknown, {"prometheus": first}, ("prometheus",))
        self._backoff.success(backoff_key, f"prometheus {mask_url(url)}")
        values = _signal_values(result.figures)
        rate, previous = result.figures.request_rate, state.last_prometheus_read
        values["arrivals"] = rate * (now - previous) if rate is not None and previous is not None else None
        state.last_prometheus_read = now
        errors = {f"prometheus {name}": message for name, message in result.errors.items()}
        failed = ("prometheus",) if errors else ()
        source = f"prometheus {mask_url(url)} (window {metrics.window:g}s)"
        return _Part(values, errors, failed, source, _extra(result.figures))


class _Managed:
    """A management-API reader; its HTTP client belongs to the SignalReader."""

    def __init__(self, reader: RabbitManagementReader):
        self._reader = reader

    async def read(self, queues: Sequence[str]) -> QueueCounts:
        return await self._reader.read(queues)

    async def aclose(self) -> None:
        return None


def _signal_values(f: VllmFigures) -> dict[str, float | None]:
    return {
        "ttft_p50_s": f.ttft_p50_s,
        "ttft_p95_s": f.ttft_p95_s,
        "ttft_p99_s": f.ttft_p99_s,
        "requests_waiting": f.requests_waiting,
        "requests_running": f.requests_running,
        "kv_cache_usage": f.kv_cache_usage,
        "request_rate": f.request_rate,
        "arrivals": f.arrivals,
        "finish_rate": f.finish_rate,
        "prompt_tokens_rate": f.prompt_tokens_rate,
        "generation_tokens_rate": f.generation_tokens_rate,
        "prefix_cache_hit_rate": f.prefix_cache_hit_rate,
    }


def _extra(f: VllmFigures) -> dict[str, Any]:
    wanted = ("kv_cache_usage_max", "preemptions", "endpoints_answering", "window_s")
    return {k: v for k, v in asdict(f).items() if k in wanted}
