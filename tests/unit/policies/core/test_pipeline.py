"""The pipeline end to end on synthetic ticks: a step scales out within two ticks; missing or stale
readings hold (never to zero); a recurring burst holds the fleet before it; the state survives JSON."""

from __future__ import annotations

import json

from scalectl.policies.core.pipeline import CoreInputs, CoreState, Reading, decide
from tests.unit.policies.core.synth import T0, TICK, counts, cron_bursts

PRIOR = 10.0  # req/s one instance carries at the SLO


def inputs(count: float | None, current: int, *, read_at: float | None, prior: float | None = PRIOR) -> CoreInputs:
    return CoreInputs(
        readings=(Reading("requests", "req/s", count, prior, backlog=0.0),),
        current=current,
        ready=current,
        floor=1,
        ttft_s=None,  # no latency reading: capacity stays at the prior (test_capacity.py learns it)
        ttft_target_s=0.5,
        horizon_s=180.0,
        read_at=read_at,
    )


def drive(ticks, state: CoreState, current: int):
    out = []
    for t, n in ticks:
        current, reason, state = decide(inputs(n, current, read_at=t), state, t)
        out.append((current, reason))
    return state, current, out


def test_a_step_scales_out_within_two_ticks_to_its_level() -> None:
    state, current, _ = drive(counts(lambda t: 40.0, 60), CoreState(last_t=T0), 5)
    assert current <= 6  # 40 req/s ÷ 10 with the cold or measured headroom
    start = T0 + 60 * TICK
    _, _, after = drive(counts(lambda t: 160.0, 2, seed=3, start=start), state, current)
    assert after[0][0] >= 16  # 160 req/s ÷ 10 per instance, in the first tick of the step
    assert "(surge" in after[0][1]


def test_unknown_or_stale_readings_hold_and_never_scale_in() -> None:
    state, current, _ = drive(counts(lambda t: 40.0, 30), CoreState(last_t=T0), 5)
    now = T0 + 31 * TICK
    desired, reason, _ = decide(inputs(None, current, read_at=now), state, now)
    assert (desired, reason) == (current, f"requests unknown (no scale-in on missing data) → hold {current}")
    desired, reason, _ = decide(inputs(0.0, current, read_at=now - 120), state, now)
    assert desired == current
    assert reason.startswith("readings stale (taken 2m ago)")
    desired, _, _ = decide(inputs(None, 0, read_at=now), state, now)
    assert desired == 1  # never to zero: the floor


def test_a_recurring_burst_holds_the_fleet_before_it() -> None:
    state, current = CoreState(last_t=T0), 2
    ticks = counts(cron_bursts(base=20.0, times=6.0), 4 * 75)  # 75 minutes of 2–3 minute bursts every 15
    state, current, out = drive(ticks, state, current)
    # minute 75 starts a cycle: from a boot horizon (3 m) before it, the 15 m period sizes the fleet for
    # the burst due (6 × 20 req/s ÷ 10), not for the lull's 20 req/s that the trend sees
    before = out[-4 * 3 :]
    assert all(c >= 12 for c, _ in before), before[-1]
    assert all("(15m period, above trend; err p90" in r for _, r in before[:4]), before[0][1]


def test_the_state_survives_json() -> None:
    state, _, _ = drive(counts(cron_bursts(), 4 * 70), CoreState(last_t=T0), 2)
    assert CoreState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_an_unknown_prior_holds_and_says_what_is_missing() -> None:
    state, current, _ = drive(counts(lambda t: 40.0, 4), CoreState(last_t=T0), 5)
    now = T0 + 5 * TICK
    desired, reason, _ = decide(inputs(600.0, current, read_at=now, prior=None), state, now)
    assert desired == current
    assert reason.startswith("capacity per instance unknown")
