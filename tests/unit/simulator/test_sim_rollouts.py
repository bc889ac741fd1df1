"""A rollout during a simulation: `rollout restart` at its time replaces every instance through the real
reconciler, and the report says how long it took, its SLO against the rest of the run, and what it billed."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from scalectl.controller.store.models import InstanceRecord
from scalectl.simulator.controller_run import RunOptions, SimulationResult, simulate
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.tiers.config import parse_config
from scalectl.tiers.errors import ConfigError
from tests.builders import min_floor, tier, tiers_yaml

TIERS = tiers_yaml({"chat": tier(min=3, max=8, serving={"target_concurrency": 100}, policy=min_floor(3))})

WORKLOAD = """
seed: 3
start: "2026-03-16T10:00:00+00:00"
duration: 90m
rollouts: [{tier: chat, at: 20m}]
tiers:
  chat:
    kind: poisson
    rate: 30
    input_tokens: {mean: 600, cv: 0.4}
    output_tokens: {mean: 200, cv: 0.5}
    ttft_target: 500ms
"""


def run(workload: str = WORKLOAD) -> SimulationResult:
    config, load = parse_config(TIERS, "tiers.yaml"), parse_workload(workload, "w.yaml")
    return simulate(config, TIERS, load, options=RunOptions(baselines=False))


def test_a_rollout_replaces_every_instance_and_is_reported() -> None:
    result = run()
    (rollout,) = result.report.rollouts
    assert rollout.tier == "chat" and rollout.started_s == pytest.approx(20 * 60, abs=15)
    assert rollout.finished_s is not None and rollout.started_s < rollout.finished_s < 90 * 60
    assert rollout.billed_before >= 3
    assert rollout.peak_billed == rollout.billed_before + 1  # one surge at a time (max_surge 1)
    assert rollout.slo_during is not None and rollout.slo_outside is not None
    assert rollout.instance_hours > 0
    assert result.store is not None
    with result.store.sessions() as session:
        rows = list(session.scalars(select(InstanceRecord)).all())
    hashes = {r.server_hash for r in rows if r.state == "ready"}
    assert len(hashes) == 1  # the whole fleet runs the new generation at the end
    assert sum(1 for r in rows if r.state == "terminated") >= rollout.billed_before  # every old one retired
    data = result.report.to_dict()
    assert data["rollouts"][0]["tier"] == "chat"
    assert "rollout chat at 0.33 h: done in" in result.report.rollout_lines()[0]


def test_a_run_without_rollouts_reports_none() -> None:
    result = run(WORKLOAD.replace("rollouts: [{tier: chat, at: 20m}]\n", ""))
    assert result.report.rollouts == [] and "rollouts" not in result.report.to_dict()


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("rollouts: [{tier: web, at: 20m}]", 'rollouts[0].tier: "web" has no load in this workload'),
        ("rollouts: [{tier: chat, at: 2h}]", "rollouts[0].at: 7200s is not before the end of the run"),
    ],
)
def test_a_bad_rollout_names_the_field(bad: str, says: str) -> None:
    with pytest.raises((ConfigError, ValueError)) as err:
        parse_workload(WORKLOAD.replace("rollouts: [{tier: chat, at: 20m}]", bad), "w.yaml")
    assert says in str(err.value)
