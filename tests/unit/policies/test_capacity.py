"""Capacity learning: synthetic fleets with a known knee, noise, idle windows, the clamp, and restarts."""

from __future__ import annotations

import random

import pytest

from scalectl.policies.capacity import BIN, SETTLE_S, estimate, observe, small_fleet_capacity
from scalectl.policies.types import PolicyState

PRIOR = 100.0
TARGET = 0.5


def learn(loads: list[float], ttft_of: object, *, ready: int = 8, seed: int = 0) -> dict[str, float]:
    """Feed one observation per 10 s tick of a settled fleet: load per instance → TTFT by ``ttft_of``."""
    rng = random.Random(seed)
    learned = observe({}, now=0.0, prior=PRIOR, load=0.0, ready=ready, ttft=None, target=TARGET)
    t = SETTLE_S
    for per_instance in loads:
        ttft = ttft_of(per_instance, rng)  # type: ignore[operator]
        learned = observe(learned, now=t, prior=PRIOR, load=per_instance * ready, ready=ready, ttft=ttft, target=TARGET)
        t += 10.0
    return learned


def knee_at(knee: float, noise: float = 0.0):  # type: ignore[no-untyped-def]
    def ttft(per_instance: float, rng: random.Random) -> float:
        breached = per_instance > knee
        if rng.random() < noise:
            breached = not breached
        return 2.0 if breached else 0.2

    return ttft


def sweep(low: float, high: float, n: int = 1500) -> list[float]:
    return [low + (high - low) * (i % 60) / 59 for i in range(n)]


def test_learns_the_largest_load_that_kept_ttft_under_target() -> None:
    result = estimate(learn(sweep(40, 160), knee_at(120)), PRIOR)
    assert 115 <= result.per_instance <= 120  # the top of the last good bin below the knee
    assert "learned: TTFT breached from 120" in result.text


def test_a_knee_above_the_prior_raises_capacity() -> None:
    result = estimate(learn(sweep(60, 180), knee_at(150)), PRIOR)
    assert 145 <= result.per_instance <= 150


def test_noise_does_not_move_the_knee() -> None:
    clean = estimate(learn(sweep(40, 160), knee_at(120)), PRIOR).per_instance
    noisy = estimate(learn(sweep(40, 160), knee_at(120, noise=0.1), seed=3), PRIOR).per_instance
    assert abs(noisy - clean) <= 2 * BIN * PRIOR


def test_windows_with_too_little_load_to_tell_leave_the_prior() -> None:
    # A quiet fleet at 5–15 per instance: breaches there (a long prompt, a cold start) say nothing.
    learned = learn(sweep(5, 15), lambda x, rng: 2.0 if rng.random() < 0.5 else 0.2)
    result = estimate(learned, PRIOR)
    assert result.per_instance == PRIOR and result.learned is None
    assert "no load high enough yet" in result.text


def test_only_good_observations_below_the_prior_keep_the_prior() -> None:
    assert estimate(learn(sweep(40, 90), knee_at(200)), PRIOR).per_instance == PRIOR


def test_learned_capacity_is_clamped_to_twice_the_prior_and_says_so() -> None:
    result = estimate(learn(sweep(150, 400), knee_at(1000)), PRIOR)
    assert result.per_instance == 2 * PRIOR
    assert result.learned is not None and result.learned > 2 * PRIOR
    assert "clamped to twice the prior" in result.text


def test_learned_capacity_is_clamped_to_a_tenth_of_the_prior_and_says_so() -> None:
    learned = {"cap.prior": PRIOR, "cap.b0.good": 10.0, "cap.b1.bad": 10.0, "cap.b2.bad": 10.0}
    result = estimate(learned, PRIOR)  # good below 5 per instance, breached from 5: a knee at a twentieth
    assert result.learned == pytest.approx(0.05 * PRIOR)
    assert result.per_instance == pytest.approx(0.1 * PRIOR)
    assert "clamped to a tenth of the prior" in result.text


def test_breaches_at_every_load_seen_are_the_traffic_not_capacity() -> None:
    learned = learn(sweep(30, 160), lambda x, rng: 0.9)  # long prompts: TTFT over the target at any load
    result = estimate(learned, PRIOR)
    assert result.per_instance == PRIOR and result.learned is None


def test_a_changed_ready_count_waits_for_the_ttft_window_to_settle() -> None:
    learned = observe({}, now=0.0, prior=PRIOR, load=800, ready=8, ttft=2.0, target=TARGET)
    for t in (10.0, 30.0, SETTLE_S - 1):
        learned = observe(learned, now=t, prior=PRIOR, load=800, ready=8, ttft=2.0, target=TARGET)
    assert not any(k.startswith("cap.b") for k in learned)
    learned = observe(learned, now=SETTLE_S, prior=PRIOR, load=800, ready=8, ttft=2.0, target=TARGET)
    assert learned["cap.b20.bad"] == 1.0


def test_a_new_prior_starts_afresh() -> None:
    learned = learn(sweep(40, 160), knee_at(120))
    assert estimate(learned, 200.0).per_instance == 200.0


def test_what_was_learned_survives_a_restart_through_the_stored_state() -> None:
    learned = learn(sweep(40, 160), knee_at(120))
    state = PolicyState.from_dict(PolicyState(learned=learned).to_dict())
    assert estimate(state.learned, PRIOR) == estimate(learned, PRIOR)


def test_a_good_ttft_while_requests_queue_is_not_filed() -> None:
    """At a spike's onset the TTFT window still shows the calm before it: no evidence that the load holds."""
    learned = observe({}, now=0.0, prior=PRIOR, load=800, ready=8, ttft=None, target=TARGET)
    learned = observe(learned, now=SETTLE_S, prior=PRIOR, load=1600, ready=8, ttft=0.2, target=TARGET, waiting=600)
    assert not any(k.startswith("cap.b") for k in learned)
    learned = observe(learned, now=SETTLE_S + 10, prior=PRIOR, load=1600, ready=8, ttft=2.0, target=TARGET, waiting=600)
    assert learned["cap.b40.bad"] == 1.0


def test_a_few_good_windows_above_the_prior_do_not_raise_it() -> None:
    """A spike's first seconds run above the prior with a calm TTFT window: not minutes of evidence."""
    learned = learn([90.0] * 100 + [130.0] * 20, knee_at(1000))
    assert estimate(learned, PRIOR).per_instance == PRIOR
    learned = learn([90.0] * 100 + [130.0] * 40, knee_at(1000))
    assert estimate(learned, PRIOR).per_instance == pytest.approx(135.0)


def test_a_small_fleet_keeps_its_own_breach_point() -> None:
    """Twenty instances held 110 per instance; one instance breached from 70: the pooled knee is the large
    fleet's, and the one-instance breach point is its own."""
    learned = learn(sweep(40, 160), knee_at(120), ready=20)
    assert small_fleet_capacity(learned, PRIOR, 1) is None  # never seen at one instance
    t = 10_000.0
    learned = observe(learned, now=t, prior=PRIOR, load=80.0, ready=1, ttft=None, target=TARGET)  # settles
    for step in range(1, 30):
        load = 50.0 if step % 2 else 80.0  # at 50 it held, at 80 it breached
        learned = observe(
            learned, now=t + SETTLE_S + step * 10, prior=PRIOR, load=load, ready=1,
            ttft=0.2 if load < 70 else 2.0, target=TARGET,
        )  # fmt: skip
    assert small_fleet_capacity(learned, PRIOR, 1) == pytest.approx(80.0)
    assert small_fleet_capacity(learned, PRIOR, 2) is None
    assert small_fleet_capacity(learned, PRIOR, 20) is None  # not a small fleet: the pooled estimate rules
    assert 115 <= estimate(learned, PRIOR).per_instance <= 120  # the pooled knee did not move


def test_a_small_fleets_breaches_do_not_lower_a_large_fleets_capacity() -> None:
    """One instance behind the balancer breaches a bursty load's tail at a third of the prior; twenty held
    three fifths of it all day. Pooled, the one instance's night would size the day's twenty at a third."""
    learned = observe({}, now=0.0, prior=PRIOR, load=35.0, ready=1, ttft=None, target=TARGET)
    t = SETTLE_S
    for ready, per_instance, ttft in [(1, 35.0, 2.0)] * 100 + [(20, 25.0, 0.2)] * 100 + [(20, 60.0, 0.2)] * 40:
        learned = observe(learned, now=t, prior=PRIOR, load=per_instance * ready, ready=ready, ttft=ttft,
                          target=TARGET)  # fmt: skip
        t += 10.0
    assert small_fleet_capacity(learned, PRIOR, 1) == pytest.approx(35.0, abs=BIN * PRIOR)
    assert estimate(learned, PRIOR).per_instance == PRIOR


def test_a_breach_while_a_backlog_drains_is_not_filed() -> None:
    """After a cold start the fleet works off minutes of backlog: those first tokens are the backlog's wait,
    not what the load left per instance costs, so they teach no knee (the fleet would otherwise learn
    a knee at a fraction of its capacity and keep it). A breach while the backlog still grows is filed."""
    learned = observe({}, now=0.0, prior=PRIOR, load=4000, ready=8, ttft=None, target=TARGET, waiting=3600)
    t = SETTLE_S
    for waiting in (3800.0, 4000.0):  # an overload: the backlog grows, and the breach is this load's
        learned = observe(learned, now=t, prior=PRIOR, load=400 + waiting, ready=8, ttft=9.0, target=TARGET,
                          waiting=waiting)  # fmt: skip
        t += 10.0
    assert learned["cap.b50.bad"] == pytest.approx(2.0, abs=0.01)  # halved every 6 h: barely
    for waiting in (3000.0, 2000.0, 1000.0, 300.0, 0.0):  # the backlog drains, TTFT still shows its wait
        learned = observe(learned, now=t, prior=PRIOR, load=240 + waiting, ready=8, ttft=9.0, target=TARGET,
                          waiting=waiting)  # fmt: skip
        t += 10.0
    assert [k for k in learned if k.endswith(".bad")] == ["cap.b50.bad"]
    t += SETTLE_S  # the TTFT window no longer holds the backlog: a breach now is the load's
    learned = observe(learned, now=t, prior=PRIOR, load=240, ready=8, ttft=9.0, target=TARGET, waiting=0.0)
    assert len([k for k in learned if k.endswith(".bad")]) == 2
