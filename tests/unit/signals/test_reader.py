"""SignalReader with fake HTTP (httpx.MockTransport) and a fake clock: partial failures, backoff, counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import httpx
import pytest

from scalectl.clocks import FakeClock
from scalectl.sources.reader import SignalReader
from scalectl.sources.redact import mask_url, scrub
from scalectl.sources.spec import SignalsSpec
from tests.unit.signals.fixtures import text

Handler = Callable[[httpx.Request], httpx.Response]


class FakeServers:
    """Answers /metrics per host from a script; counts requests per host."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[str]] = {}
        self.down: set[str] = set()
        self.status: dict[str, int] = {}
        self.calls: Counter[str] = Counter()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host = f"{request.url.host}:{request.url.port}"
        self.calls[host] += 1
        if host in self.down:
            raise httpx.ConnectError("All connection attempts failed", request=request)
        if host in self.status:
            return httpx.Response(self.status[host], text="oops")
        queue = self.bodies[host]
        return httpx.Response(200, text=queue.pop(0) if len(queue) > 1 else queue[0])


def make_reader(servers: FakeServers, clock: FakeClock, **kw: object) -> SignalReader:
    client = httpx.AsyncClient(transport=httpx.MockTransport(servers))
    return SignalReader(clock, client=client, env={}, **kw)  # type: ignore[arg-type]


SPEC = SignalsSpec.model_validate({"metrics": {"kind": "vllm", "window": "60s"}})


async def test_figures_from_answering_endpoints_and_an_error_per_silent_one() -> None:
    servers, clock = FakeServers(), FakeClock()
    servers.bodies["a:8000"] = [text("new_1"), text("new_2")]
    servers.bodies["b:8000"] = [text("old_1"), text("old_2")]
    servers.down.add("c:8000")
    reader = make_reader(servers, clock)
    await reader.read("orch", SPEC, ["a:8000", "b:8000", "c:8000"])
    clock.advance(15)
    reading = await reader.read("orch", SPEC, ["a:8000", "b:8000", "c:8000"])
    s = reading.signals
    assert s.ttft_p95_s is not None and s.request_rate is not None
    from scalectl.sources.exposition import parse_vllm_metrics

    expected_running = parse_vllm_metrics(text("new_2"), 0).running + parse_vllm_metrics(text("old_2"), 0).running  # type: ignore[operator]
    assert s.requests_running == expected_running
    assert list(reading.errors) == ["vllm http://c:8000"]
    assert "2 of 3 endpoints" in reading.sources["ttft_p95_s"]
    assert reading.read_at == clock.now()
    assert reader.error_counts("orch") == {"vllm http://c:8000": 2}  # 15 s later its 2 s rest is over
    await reader.aclose()


async def test_all_endpoints_failing_means_unknown_not_zero() -> None:
    servers, clock = FakeServers(), FakeClock()
    servers.down.update({"a:8000", "b:8000"})
    reader = make_reader(servers, clock)
    reading = await reader.read("orch", SPEC, ["a:8000", "b:8000"])
    assert reading.signals.requests_waiting is None
    assert reading.signals.ttft_p95_s is None
    assert reading.signals.kv_cache_usage is None
    assert set(reading.errors) == {"vllm http://a:8000", "vllm http://b:8000"}
    await reader.aclose()


async def test_a_failing_endpoint_backs_off_exponentially() -> None:
    servers, clock = FakeServers(), FakeClock()
    servers.status["a:8000"] = 503
    reader = make_reader(servers, clock, backoff_base=2.0, backoff_cap=60.0)
    attempts = []
    for _ in range(40):  # 40 one-second ticks
        await reader.read("orch", SPEC, ["a:8000"])
        attempts.append(servers.calls["a:8000"])
        clock.advance(1)
    # Tries at t=0, 2, 6, 14, 30: waits of 2, 4, 8, 16 s.
    assert servers.calls["a:8000"] == 5
    assert reader.error_counts("orch") == {"vllm http://a:8000": 5}
    reading = await reader.read("orch", SPEC, ["a:8000"])
    assert "HTTP 503" in reading.errors["vllm http://a:8000"] and "next try in" in reading.errors["vllm http://a:8000"]
    await reader.aclose()


async def test_an_endpoint_that_recovers_is_read_again() -> None:
    servers, clock = FakeServers(), FakeClock()
    servers.down.add("a:8000")
    servers.bodies["a:8000"] = [text("new_1")]
    reader = make_reader(servers, clock)
    assert (await reader.read("t", SPEC, ["a:8000"])).signals.requests_running is None
    servers.down.clear()
    clock.advance(2)
    reading = await reader.read("t", SPEC, ["a:8000"])
    assert reading.signals.requests_running is not None and reading.errors == {}
    await reader.aclose()


async def test_static_endpoints_join_the_managed_ones_once() -> None:
    servers, clock = FakeServers(), FakeClock()
    servers.bodies["a:8000"] = [text("new_1")]
    servers.bodies["static:9000"] = [text("old_1")]
    spec = SignalsSpec.model_validate({"endpoints": ["static:9000", "a:8000"]})
    reader = make_reader(servers, clock)
    reading = await reader.read("t", spec, ["a:8000"])
    assert servers.calls == {"a:8000": 1, "static:9000": 1}
    assert "2 of 2 endpoints" in reading.sources["requests_running"]
    await reader.aclose()


async def test_bad_exposition_and_nan_are_per_endpoint_errors() -> None:
    servers, clock = FakeServers(), FakeClock()
    servers.bodies["html:1"] = ["<html>bad gateway</html>"]
    servers.bodies["nan:1"] = [text("new_1").replace("vllm:kv_cache_usage_perc{", 'vllm:kv_cache_usage_perc{x="",')]
    servers.bodies["nan:1"] = [
        "\n".join(
            (line.rsplit(" ", 1)[0] + " NaN") if line.startswith("vllm:kv_cache_usage_perc{") else line
            for line in text("new_1").splitlines()
        )
    ]
    reader = make_reader(servers, clock)
    reading = await reader.read("t", SPEC, ["html:1", "nan:1"])
    assert "no vllm: metrics" in reading.errors["vllm http://html:1"]
    assert "kv_cache_usage_perc is nan" in reading.errors["vllm http://nan:1"]
    assert reading.signals.kv_cache_usage is None  # the only answering server's KV figure was NaN
    assert reading.signals.requests_running is not None
    await reader.aclose()


async def test_no_metrics_configured_and_no_endpoints_reads_nothing() -> None:
    servers, clock = FakeServers(), FakeClock()
    reader = make_reader(servers, clock)
    reading = await reader.read("t", SignalsSpec(), [])
    assert reading.signals.to_dict() == dict.fromkeys(reading.signals.to_dict())
    assert reading.errors == {}
    await reader.aclose()


async def test_broker_url_missing_or_unsupported() -> None:
    clock = FakeClock()
    reader = make_reader(FakeServers(), clock)
    missing = await reader.read("t", SignalsSpec.model_validate({"queue": {"broker_url_env": "MY_BROKER"}}), [])
    assert missing.signals.queue_depth is None and "$MY_BROKER" in missing.errors["queue"]
    default = await reader.read("u", SignalsSpec.model_validate({"queue": {}}), [])
    assert "SCALECTL_BROKER_URL" in default.errors["queue"]
    odd = await reader.read("v", SignalsSpec.model_validate({"queue": {"broker_url": "sqs://k:secret@x"}}), [])
    assert "unsupported broker scheme" in odd.errors["queue"] and "secret" not in odd.errors["queue"]
    await reader.aclose()


def test_broker_url_from_env_var_named_in_the_spec() -> None:
    reader = SignalReader(FakeClock(), env={"MY_BROKER": "redis://h/3", "SCALECTL_BROKER_URL": "redis://d/0"})
    from scalectl.sources.spec import QueueSource

    assert reader._broker_url(QueueSource(broker_url_env="MY_BROKER")) == "redis://h/3"
    assert reader._broker_url(QueueSource()) == "redis://d/0"
    assert reader._broker_url(QueueSource(broker_url="amqp://x//")) == "amqp://x//"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:pw@host:6379/1", "redis://:***@host:6379/1"),
        ("amqp://user:p%40ss@rabbit:5672//", "amqp://user:***@rabbit:5672//"),
        ("redis://host:6379/0", "redis://host:6379/0"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_scrub_removes_passwords_from_driver_messages() -> None:
    url = "redis://:hunter2@h:6379/1"
    assert "hunter2" not in scrub(f"Error connecting to {url}: AUTH hunter2 failed", url)
