"""A serving tier at zero wakes on its first requests in the simulator, as the activator makes it do in the
daemon; without the activator its vLLM figures stay unknown at zero and it never starts."""

from __future__ import annotations

from sqlalchemy import select

from scalectl.controller.store.models import InstanceRecord
from scalectl.simulator.controller_run import RunOptions, SimulationResult, simulate
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml

TIERS = tiers_yaml({"chat": tier(max=4, serving={"target_concurrency": 100}, policy=min_floor(0, idle_after="5m"))})
# An activator that holds every request of the boot (20 req/s for up to 5 minutes).
TIERS_HOLDING_ALL = tiers_yaml(
    {
        "chat": tier(
            max=4,
            serving={"target_concurrency": 100},
            activator={"max_held": 10_000},
            policy=min_floor(0, idle_after="5m"),
        )
    }
)

# Nothing for 20 minutes, then 40 minutes of traffic, then quiet again.
WORKLOAD = """
seed: 7
start: "2026-03-16T10:00:00+00:00"
duration: 90m
tiers:
  chat:
    kind: poisson
    rate: 20
    input_tokens: {mean: 600, cv: 0.4}
    output_tokens: {mean: 200, cv: 0.5}
    ttft_target: 500ms
    shape:
      - {kind: spike, at: 0s, duration: 20m, factor: 0}
      - {kind: spike, at: 60m, duration: 30m, factor: 0}
cloud: {provision_delay: [2m, 5m]}   # a boot of at most 5 minutes: what the activator's hold is sized for
"""


def run(tiers: str) -> SimulationResult:
    config, workload = parse_config(tiers, "tiers.yaml"), parse_workload(WORKLOAD, "w.yaml")
    return simulate(config, tiers, workload, options=RunOptions(baselines=False))


def test_a_tier_at_zero_wakes_on_its_first_requests_and_returns_to_zero() -> None:
    result = run(TIERS_HOLDING_ALL)
    chat = result.report.tiers["chat"]
    assert chat.requests > 40_000
    assert chat.slo_known == chat.requests  # every request was served: none left waiting at the end
    assert chat.refused == 0 and chat.timed_out == 0
    assert chat.peak_instances >= 1
    assert result.events.get("launched", 0) >= 1 and result.events.get("retired", 0) >= 1
    # The first requests waited for the boot: the cold start shows in the tail, not in the median.
    assert chat.ttft_p50_s is not None and chat.ttft_p50_s < 0.5
    assert chat.ttft_p99_s is not None and chat.ttft_p99_s > 0.5
    # Nothing ran before the first request, and the tier was back at zero before the run ended.
    assert result.store is not None
    with result.store.sessions() as session:
        rows = list(session.scalars(select(InstanceRecord)).all())
    assert all(r.state == "terminated" for r in rows)
    start = parse_workload(WORKLOAD, "w.yaml").start_epoch
    assert min(r.created_at for r in rows) >= start + 20 * 60


def test_without_the_activator_a_tier_at_zero_stays_blind() -> None:
    blind = tier(max=4, activator={"enabled": False}, policy=min_floor(0, idle_after="5m"))
    result = run(tiers_yaml({"chat": blind}))
    chat = result.report.tiers["chat"]
    assert chat.peak_instances == 0
    assert result.events.get("launched", 0) == 0


def test_the_activator_at_zero_holds_its_max_and_refuses_the_rest_as_misses() -> None:
    """The daemon's activator holds at most ``max_held`` (100 by default) while the first instance boots; every
    later request is answered 503 at once. At 20 req/s and a 2-5 minute boot most of the wake is refused."""
    held_all, bounded = run(TIERS_HOLDING_ALL).report.tiers["chat"], run(TIERS).report.tiers["chat"]
    assert bounded.requests == held_all.requests  # the same traffic
    boot_arrivals = 20 * 120  # at least this many arrive before the first instance is ready
    assert bounded.refused >= boot_arrivals - 100
    assert bounded.slo_known == bounded.requests  # refused requests are judged (misses), not lost from the count
    assert bounded.slo_met <= bounded.requests - bounded.refused
    # Held without bound, the whole boot's arrivals land on the first instance at once and its backlog
    # misses too; refused, they miss at once and the first instance starts level.
