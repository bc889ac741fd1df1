"""The embedded demo's load: its latencies come from the shared engine model."""

from __future__ import annotations

import math

from scalectl.clocks import FakeClock
from scalectl.controller.embedded.load import OUTPUT_TOKENS, PROMPT_TOKENS, SyntheticLoad
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sizing.engine import launched_engine
from scalectl.sizing.spec import ServingSpec


def _load() -> SyntheticLoad:
    clock = FakeClock(0.0)
    return SyntheticLoad(clock, SimulatedCloud(clock=clock))


def test_demo_engines_are_what_the_daemon_launches_on_the_bundled_tiers() -> None:
    load = _load()
    assert load.engines["orchestrator"] == launched_engine(ServingSpec(), "H100-SXM5-80GB")
    assert load.engines["support-daytime"] == launched_engine(ServingSpec(), "H100-PCIe-80GB")


def test_ttft_is_the_engine_step_plus_client_overhead_until_sessions_outnumber_the_slots() -> None:
    load = _load()
    serving, engine = load.serving["orchestrator"], load.engines["orchestrator"]
    quiet = load._serve(serving, engine, elapsed=0.0, dt=5.0, running=2)  # night: every session has a slot
    batch = serving.peak_sessions * serving.night / 2
    kv = batch * (PROMPT_TOKENS + OUTPUT_TOKENS / 2)
    engine_s = 0.5 * float(engine.decode_step_s(batch, kv)) + engine.step_s(batch, kv, PROMPT_TOKENS)
    assert quiet.queue_depth == 0
    assert quiet.ttft_p50_s == round(engine.overhead_median_s + engine_s, 4)
    assert quiet.ttft_p95_s == round(engine.overhead_median_s * math.exp(1.645 * engine.overhead_sigma) + engine_s, 4)
    assert quiet.ttft_p95_s is not None and quiet.ttft_p95_s < 0.5
    busy = load._serve(serving, engine, elapsed=serving.period / 2, dt=5.0, running=2)  # the peak on 2 instances
    assert busy.queue_depth and busy.queue_depth > 0
    assert busy.ttft_p95_s is not None and busy.ttft_p95_s > 0.5
