"""A ramp's projection: the Theil–Sen trend through the last full minutes' arrivals, when it stands out."""

from __future__ import annotations

import pytest

from scalectl.policies import ramp

T0 = 1_767_225_600.0  # a minute boundary


def counted(rates_per_minute: list[float], *, tick: float = 5.0, start: float = T0) -> tuple[dict[str, float], float]:
    """Ticks every ``tick`` seconds through consecutive minutes at the given arrival rates; the learned figures
    and the time of the last tick (the first tick of the minute after them)."""
    learned: dict[str, float] = {}
    now = start
    for rate in rates_per_minute:
        for _ in range(int(60 / tick)):
            now += tick
            learned = ramp.observe(learned, now=now, arrivals=rate * tick, since=now - tick)
    return learned, now


def test_a_linear_ramp_is_projected_over_the_lead() -> None:
    # 60, 66, ... req/s: +6 req/s a minute, 0.1 req/s each second. A tick at a minute's start counts the 5 s
    # before it into the minute they arrived in; the first (partial) minute is left out
    learned, now = counted([60.0 + 6 * i for i in range(7)])
    found = ramp.projected(learned, now=now, lead=300.0)
    assert found is not None
    assert found.slope == pytest.approx(0.1)
    # the last full minute (the 7th, 96 req/s) at its middle, 30 s before now; then 300 s of lead
    assert now == T0 + 420
    assert found.rate == pytest.approx(96 + 0.1 * (30 + 300))


@pytest.mark.parametrize("tick", [35.0, 70.0, 95.0])
def test_ticks_that_do_not_divide_a_minute_still_show_the_ramp(tick: float) -> None:
    """Slow or irregular ticks: each one's arrivals are spread over the minutes since the one before. Filed
    whole in the minute of the tick that counts them, some minutes read a tick's worth high, others hold
    nothing, and that scatter hid the ramp."""
    learned: dict[str, float] = {}
    now, last = T0, None
    while now < T0 + 600:
        now += tick
        arrivals = sum(60.0 + 0.1 * (t - T0) for t in range(int(now - tick), int(now)))  # +0.1 req/s each second
        learned = ramp.observe(learned, now=now, arrivals=arrivals, since=last)
        last = now
    found = ramp.projected(learned, now=now, lead=300.0)
    assert found is not None
    assert found.slope == pytest.approx(0.1, rel=0.25)  # a tick longer than a minute blurs the minutes it spans


def test_a_steady_load_read_by_uneven_ticks_is_no_ramp() -> None:
    learned: dict[str, float] = {}
    now, last = T0, None
    for tick in [20.0, 85.0, 40.0, 70.0, 15.0, 95.0, 55.0, 30.0, 75.0, 60.0]:
        now += tick
        learned = ramp.observe(learned, now=now, arrivals=100.0 * tick, since=last)
        last = now
    assert ramp.projected(learned, now=now, lead=300.0) is None
    full = [v for k, v in learned.items() if k.startswith("ramp.m") and int(k[6:]) < now // 60]
    assert all(v == pytest.approx(6000.0) for v in full[1:])  # every full minute 100 req/s


def test_a_plateau_with_noise_is_no_ramp() -> None:
    learned, now = counted([100, 104, 97, 103, 99, 102, 98])  # ±2 req/s: a count of 6,000 ± 77 a minute
    assert ramp.projected(learned, now=now, lead=300.0) is None


def test_a_burst_minute_on_a_plateau_is_no_ramp() -> None:
    learned, now = counted([50, 50, 50, 50, 150, 50, 50])
    assert ramp.projected(learned, now=now, lead=300.0) is None


@pytest.mark.parametrize(("minutes", "found"), [(4, False), (5, True)])
def test_a_ramp_needs_four_full_minutes(minutes: int, found: bool) -> None:
    # the first minute after the counting starts is partial (its first tick is 5 s in), so 5 minutes give 4 full
    learned, now = counted([60.0 + 12 * i for i in range(minutes)])
    assert (ramp.projected(learned, now=now, lead=300.0) is not None) is found


def test_a_falling_load_is_no_ramp() -> None:
    learned, now = counted([100.0 - 8 * i for i in range(7)])
    assert ramp.projected(learned, now=now, lead=300.0) is None


def test_a_tick_with_unknown_arrivals_starts_the_counts_afresh() -> None:
    learned, now = counted([60.0 + 6 * i for i in range(7)])
    learned = ramp.observe(learned, now=now + 5, arrivals=None)
    assert ramp.projected(learned, now=now + 5, lead=300.0) is None
    assert not [k for k in learned if k.startswith("ramp.")]


def test_only_the_last_six_minutes_are_kept() -> None:
    learned, _ = counted([10.0] * 20)
    assert len([k for k in learned if k.startswith("ramp.m")]) <= ramp.MINUTES + 1


@pytest.mark.parametrize("at", [2, 3, 4, 5])
def test_a_step_is_no_ramp(at: int) -> None:
    """Traffic reaching an idle tier, or a spike's onset: a line through it would carry the step on rising."""
    learned, now = counted([0.0] * at + [150.0] * (7 - at))
    assert ramp.projected(learned, now=now, lead=300.0) is None


def test_a_step_after_a_plateau_that_noise_tilts_up_is_no_ramp() -> None:
    """A spike's onset after minutes that rose by a hair: both halves rise, one at a fraction of the other
    (the minutes kept read 178, 178, 179.8, 177.7, 262.3, 268.2; a line through them rises 0.3 req/s a
    second)."""
    learned, now = counted([178.0, 178, 178, 178, 180, 177.5, 270, 268])
    assert ramp.projected(learned, now=now, lead=300.0) is None
