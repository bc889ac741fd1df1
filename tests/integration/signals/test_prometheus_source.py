"""The Prometheus source against a local fake Prometheus HTTP API (documented JSON shapes, errors, NaN)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import FakeClock
from scalectl.sources.reader import SignalReader
from scalectl.sources.spec import SignalsSpec

pytestmark = pytest.mark.integration
NOW = 1_767_225_600.0

Answer = Callable[[str], tuple[int, Any]]


def vector(value: str, ts: float = NOW) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [ts, value]}]}}


class FakePrometheus:
    def __init__(self) -> None:
        self.queries: list[str] = []
        self.answer: Answer = lambda q: (200, vector("1"))

    async def query(self, request: Request) -> Response:
        q = request.query_params["query"]
        self.queries.append(q)
        status, body = self.answer(q)
        if isinstance(body, str):
            return Response(body, status_code=status)
        return JSONResponse(body, status_code=status)


@pytest.fixture
def prometheus() -> Iterator[tuple[FakePrometheus, str]]:
    fake = FakePrometheus()
    app = Starlette(routes=[Route("/api/v1/query", fake.query, methods=["GET", "POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield fake, f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def spec(url: str, **metrics: Any) -> SignalsSpec:
    return SignalsSpec.model_validate({"metrics": {"kind": "prometheus", "prometheus_url": url, **metrics}})


def realistic(q: str) -> tuple[int, Any]:
    if q.startswith("histogram_quantile(0.5,"):
        return 200, vector("0.078")
    if q.startswith("histogram_quantile(0.95,"):
        return 200, vector("0.193")
    if q.startswith("histogram_quantile(0.99,"):
        return 200, vector("0.342")
    if q.startswith("sum(vllm:num_requests_waiting"):
        return 200, vector("7")
    if q.startswith("sum(vllm:num_requests_running"):
        return 200, vector("180")
    if q.startswith("avg(vllm:kv_cache"):
        return 200, vector("0.61")
    if q.startswith("sum(rate(vllm:request_success_total"):
        return 200, vector("63.5")
    return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}


async def test_figures_and_the_queries_that_asked_for_them(prometheus: tuple[FakePrometheus, str]) -> None:
    fake, url = prometheus
    fake.answer = realistic
    clock = FakeClock(NOW)
    reader = SignalReader(clock)
    try:
        first = await reader.read("orch", spec(url, selector='job="vllm",tier="orch"', window="2m"), [])
        clock.advance(5)
        second = await reader.read("orch", spec(url, selector='job="vllm",tier="orch"', window="2m"), [])
    finally:
        await reader.aclose()
    s = first.signals
    assert (s.ttft_p50_s, s.ttft_p95_s, s.ttft_p99_s) == (0.078, 0.193, 0.342)
    assert (s.requests_waiting, s.requests_running, s.kv_cache_usage, s.request_rate) == (7, 180, 0.61, 63.5)
    assert first.errors == {}
    assert s.arrivals is None and second.signals.arrivals == pytest.approx(63.5 * 5)
    sel = '{job="vllm",tier="orch"}'
    assert (
        f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{sel}[120s])))"
        in fake.queries
    )
    assert f"avg(vllm:kv_cache_usage_perc{sel}) or avg(vllm:gpu_cache_usage_perc{sel})" in fake.queries
    assert f"sum(rate(vllm:request_success_total{sel}[120s]))" in fake.queries  # the finish rate, alone
    assert s.finish_rate == 63.5
    assert "prometheus http://127.0.0.1" in first.sources["ttft_p95_s"]


async def test_nan_and_empty_results_are_unknown(prometheus: tuple[FakePrometheus, str]) -> None:
    fake, url = prometheus
    fake.answer = lambda q: (200, vector("NaN")) if "histogram_quantile" in q else realistic(q)
    reader = SignalReader(FakeClock(NOW))
    try:
        reading = await reader.read("orch", spec(url), [])
    finally:
        await reader.aclose()
    assert reading.signals.ttft_p95_s is None and reading.signals.ttft_p50_s is None  # nothing finished: NaN
    assert reading.signals.requests_waiting == 7
    assert reading.errors == {}


async def test_error_bodies_name_the_query_and_stale_samples_are_refused(
    prometheus: tuple[FakePrometheus, str],
) -> None:
    fake, url = prometheus

    def answer(q: str) -> tuple[int, Any]:
        if "histogram_quantile(0.99" in q:
            return 400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 12"}
        if q.startswith("sum(vllm:num_requests_running"):
            return 200, vector("3", ts=NOW - 3600)
        return realistic(q)

    fake.answer = answer
    reader = SignalReader(FakeClock(NOW))
    try:
        reading = await reader.read(
            "orch",
            SignalsSpec.model_validate(
                {"stale_after": "60s", "metrics": {"kind": "prometheus", "prometheus_url": url}}
            ),
            [],
        )
    finally:
        await reader.aclose()
    assert reading.signals.ttft_p99_s is None and reading.signals.ttft_p95_s == 0.193
    assert "bad_data: parse error at char 12" in reading.errors["prometheus ttft_p99_s"]
    assert reading.signals.requests_running is None
    assert "stale" in reading.errors["prometheus requests_running"]
    assert reader.error_counts("orch") == {"prometheus": 1}


async def test_a_dead_prometheus_is_unknown_and_backs_off(prometheus: tuple[FakePrometheus, str]) -> None:
    fake, url = prometheus
    fake.answer = lambda q: (503, "<html>down for maintenance</html>")
    clock = FakeClock(NOW)
    reader = SignalReader(clock, backoff_base=10)
    try:
        first = await reader.read("orch", spec(url), [])
        asked = len(fake.queries)
        clock.advance(1)
        second = await reader.read("orch", spec(url), [])
    finally:
        await reader.aclose()
    assert all(v is None for v in first.signals.to_dict().values())
    assert "HTTP 503" in first.errors["prometheus"]
    assert len(fake.queries) == asked  # resting: not asked again one second later
    assert "next try in" in second.errors["prometheus"]
    assert not any(isinstance(v, float) and math.isnan(v) for v in second.signals.to_dict().values())
