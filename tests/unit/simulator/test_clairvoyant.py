"""The boot-aware clairvoyant: the oracle's fleet launched a boot ahead, paying each boot."""

from __future__ import annotations

import numpy as np
import pytest

from scalectl.simulator.baselines import (
    NEED_STEP_S,
    BaselineSettings,
    _oracle_and_static,
    clairvoyant,
    need_timeline,
    oracle,
    run_counts,
)
from scalectl.simulator.boots import TierBoot
from scalectl.simulator.clairvoyant import clairvoyant_plan
from scalectl.simulator.fleet import tier_models
from scalectl.simulator.report import outcomes
from scalectl.simulator.workloads.spec import parse_workload

BOOT_S = 300.0  # a known, fixed boot

# 60 sessions for 20 minutes, then 240 until the end: one step up.
STEP = """
seed: 3
start: 2026-03-16T06:00:00+00:00
duration: 40m
warmup: cold                   # opens on the oracle's first-minute fleet, as the clairvoyant does
tiers:
  agents:
    kind: sessions
    sessions: 60
    shape: [{kind: spike, at: 20m, duration: 20m, factor: 4}]
"""


def test_a_step_costs_the_oracle_plus_one_boot_per_instance_launched_for_it() -> None:
    need = np.array([2, 2, 2, 5, 5, 5])  # minutes; 3 instances more from minute 3
    plan = clairvoyant_plan(need, 60.0, lambda: BOOT_S)
    assert plan.launches == 3 and plan.boot_s == 3 * BOOT_S and plan.kept_s == 0.0
    assert (plan.ready == need).all()


def test_a_gap_shorter_than_a_boot_is_kept_running_and_a_longer_one_is_booted_again() -> None:
    need = np.array([1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1])  # gaps of 2 and 6 minutes; boot of 5 minutes
    plan = clairvoyant_plan(need, 60.0, lambda: BOOT_S)
    assert plan.kept_s == 120.0  # the 2-minute gap: cheaper to keep than to boot again
    assert plan.launches == 1 and plan.boot_s == BOOT_S  # the 6-minute gap: stopped, booted again
    assert plan.ready.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1]


def test_on_a_step_workload_the_clairvoyant_pays_exactly_its_boots_and_meets_the_slo_through_the_step(tier) -> None:
    w = parse_workload(STEP)
    models = tier_models(w, {"agents": tier()})
    model = models["agents"]
    _grid, need = need_timeline(w, model)
    before, after = int(need[0]), int(need[-1])
    assert after > before and set(need[:20].tolist()) == {before} and set(need[20:].tolist()) == {after}
    found = oracle(w, model)
    boot = TierBoot(None, (BOOT_S, BOOT_S))
    seer = clairvoyant(found, need, model, boot, w.seed)
    # By hand: the oracle's instance-minutes, plus one 5-minute boot for each instance the step adds.
    oracle_cost = (20 * before + 20 * after) / 60 * model.price_per_hour
    assert found.cost == pytest.approx(oracle_cost)
    assert seer.launches == after - before
    assert seer.cost == pytest.approx(oracle_cost + (after - before) * BOOT_S / 3600 * model.price_per_hour)
    assert seer.boot_s == (after - before) * BOOT_S

    # Run that fleet on the fleet model: launched a boot ahead of the step, ready when it comes.
    def decide(_name: str, t: float, _signals: object, _current: int) -> int:
        minute = min(int((t + BOOT_S) // NEED_STEP_S), need.shape[0] - 1)
        return max(int(need[min(int(t // NEED_STEP_S), need.shape[0] - 1)]), int(need[minute]))

    settings = BaselineSettings(provisioning_delay_s=BOOT_S)
    fleet = run_counts(w, models, decide, settings, poll_s=NEED_STEP_S, initial={"agents": before}, delay_s=BOOT_S)
    ran = outcomes(fleet, w.duration)["agents"]
    assert ran.cost == pytest.approx(seer.cost)  # billed: the oracle's minutes and the boots, nothing else
    assert ran.slo_attainment is not None and ran.slo_attainment >= 0.995
    oracle_late = run_counts(
        w, models, lambda _n, t, _s, _c: int(need[min(int(t // 60), 39)]), settings, poll_s=60.0,
        initial={"agents": before}, delay_s=BOOT_S,
    )  # fmt: skip
    late = outcomes(oracle_late, w.duration)["agents"]
    assert late.slo_attainment is not None and late.slo_attainment < ran.slo_attainment  # launched at the step


def test_the_baselines_report_the_clairvoyant_beside_the_oracle(tier) -> None:
    w = parse_workload(STEP)
    models = tier_models(w, {"agents": tier()})
    settings = BaselineSettings(boots={"agents": TierBoot(None, (BOOT_S, BOOT_S))})
    found = _oracle_and_static(w, models, settings)["agents"]
    extra = found["clairvoyant"].cost - found["oracle"].cost
    assert extra == pytest.approx(found["clairvoyant"].launches * BOOT_S / 3600 * models["agents"].price_per_hour)
    assert extra > 0
