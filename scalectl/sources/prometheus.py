"""The same tier figures from a Prometheus server that already scrapes the vLLM servers (PromQL over
``/api/v1/query``). Label selector and window are per tier."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import httpx

from scalectl.sources.redact import mask_url, scrub
from scalectl.sources.spec import MetricsSource
from scalectl.sources.vllm_window import VllmFigures


class PrometheusError(Exception):
    """One query failed; the message names the query's purpose and Prometheus' own error."""


def promql_duration(seconds: float) -> str:
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{int(seconds * 1000)}ms"


def build_queries(selector: str, window: float) -> dict[str, str]:
    """figure name -> PromQL. ``selector`` is label matchers without braces, e.g. ``job="vllm"``."""
    sel = f"{{{selector}}}" if selector.strip() else ""
    w = promql_duration(window)

    def quantile(q: float) -> str:
        return f"histogram_quantile({q}, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{sel}[{w}])))"

    return {
        "ttft_p50_s": quantile(0.5),
        "ttft_p95_s": quantile(0.95),
        "ttft_p99_s": quantile(0.99),
        "requests_waiting": f"sum(vllm:num_requests_waiting{sel})",
        "requests_running": f"sum(vllm:num_requests_running{sel})",
        "kv_cache_usage": f"avg(vllm:kv_cache_usage_perc{sel}) or avg(vllm:gpu_cache_usage_perc{sel})",
        "kv_cache_usage_max": f"max(vllm:kv_cache_usage_perc{sel}) or max(vllm:gpu_cache_usage_perc{sel})",
        # arrivals = finished + growth of what is running or waiting (the load, even while the fleet falls behind)
        "request_rate": (
            f"sum(rate(vllm:request_success_total{sel}[{w}]))"
            f" + sum(deriv(vllm:num_requests_running{sel}[{w}])) + sum(deriv(vllm:num_requests_waiting{sel}[{w}]))"
        ),
        "finish_rate": f"sum(rate(vllm:request_success_total{sel}[{w}]))",
        "prompt_tokens_rate": f"sum(rate(vllm:prompt_tokens_total{sel}[{w}]))",
        "generation_tokens_rate": f"sum(rate(vllm:generation_tokens_total{sel}[{w}]))",
        "preemptions": f"sum(increase(vllm:num_preemptions_total{sel}[{w}]))",
        "prefix_cache_hit_rate": (
            f"sum(rate(vllm:prefix_cache_hits_total{sel}[{w}])) / sum(rate(vllm:prefix_cache_queries_total{sel}[{w}]))"
        ),
    }


@dataclass(frozen=True, slots=True)
class PrometheusResult:
    figures: VllmFigures
    errors: dict[str, str]  # figure -> error
    all_failed: bool = False


class PrometheusSource:
    def __init__(self, client: httpx.AsyncClient, *, timeout: float = 2.0):
        self._client = client
        self._timeout = timeout

    async def read(self, spec: MetricsSource, *, now: float, stale_after: float) -> PrometheusResult:
        if not spec.prometheus_url:
            raise PrometheusError("metrics.kind is prometheus but metrics.prometheus_url is not set")
        queries = build_queries(spec.selector, spec.window)
        answers = await asyncio.gather(
            *(self._query(spec.prometheus_url, q, now, stale_after) for q in queries.values()),
            return_exceptions=True,
        )
        values: dict[str, float | None] = {}
        errors: dict[str, str] = {}
        for name, answer in zip(queries, answers, strict=True):
            if isinstance(answer, PrometheusError):
                errors[name] = str(answer)
                values[name] = None
            elif isinstance(answer, BaseException):
                raise answer
            else:
                values[name] = answer
        figures = VllmFigures(**values, window_s=spec.window)  # type: ignore[arg-type]
        return PrometheusResult(figures, errors, all_failed=len(errors) == len(queries))

    async def _query(self, base: str, query: str, now: float, stale_after: float) -> float | None:
        where = mask_url(base)
        try:
            response = await self._client.get(
                base.rstrip("/") + "/api/v1/query", params={"query": query, "time": f"{now:.3f}"}, timeout=self._timeout
            )
        except httpx.HTTPError as exc:
            raise PrometheusError(f"{where}: {scrub(str(exc) or type(exc).__name__, base)}") from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(f"{where}: HTTP {response.status_code}, not a Prometheus API answer") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            kind = body.get("errorType", "error") if isinstance(body, dict) else "error"
            message = body.get("error", "no error message") if isinstance(body, dict) else str(body)[:200]
            raise PrometheusError(f"{where}: {kind}: {message} (query: {query})")
        return _scalar(body.get("data") or {}, query, now, stale_after)


def _scalar(data: dict[str, object], query: str, now: float, stale_after: float) -> float | None:
    """One number from a vector or scalar result; None for no series, NaN or ±Inf. Sums several series."""
    kind, result = data.get("resultType"), data.get("result")
    samples: list[object]
    if kind == "scalar" and isinstance(result, list):
        samples = [result]
    elif kind == "vector" and isinstance(result, list):
        samples = [s.get("value") for s in result if isinstance(s, dict)]
    else:
        raise PrometheusError(f"unexpected result type {kind!r} for query: {query}")
    total: float | None = None
    for sample in samples:
        if not isinstance(sample, list) or len(sample) != 2:
            raise PrometheusError(f"malformed sample {sample!r} for query: {query}")
        timestamp, text = sample
        try:
            value = float(text)
            ts = float(timestamp)
        except (TypeError, ValueError):
            raise PrometheusError(f"malformed sample {sample!r} for query: {query}") from None
        if now - ts > stale_after:
            raise PrometheusError(f"stale: the newest sample is {now - ts:.0f}s old (query: {query})")
        if not math.isfinite(value):
            continue
        total = value if total is None else total + value
    return total
