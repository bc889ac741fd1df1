"""Min-floor: never below the floor, fast scale-out on queue or TTFT, scale-in after a quiet window and cooldown."""

from __future__ import annotations

from scalectl.policies.types import Bounds
from tests.unit.policies.helpers import Runner, spec

MF = spec(
    kind="min-floor",
    mode="thresholds",
    floor=2,
    queue_per_instance=10,
    scale_out_after="60s",
    scale_in_after="5m",
    cooldown="5m",
    ttft_max="500ms",
    scale_in_step=100,  # jump straight to the need; the stepping default is tested on its own below
)
OK_TTFT = 0.2


def test_queue_over_for_59s_holds_and_61s_scales_out_to_ceil_depth_over_per_instance() -> None:
    run = Runner(MF, current=3)
    run.tick(0, queue_depth=37, ttft_p95_s=OK_TTFT)
    assert run.tick(59, queue_depth=37, ttft_p95_s=OK_TTFT).desired == 3
    fired = run.tick(61, queue_depth=37, ttft_p95_s=OK_TTFT)
    assert fired.desired == 4
    assert fired.reason == "queue 37 > 10 × 3 for 1m1s → 4"


def test_reason_matches_the_documented_example_at_exactly_60s() -> None:
    run = Runner(MF, current=3)
    run.tick(0, queue_depth=37, ttft_p95_s=OK_TTFT)
    assert run.tick(60, queue_depth=37, ttft_p95_s=OK_TTFT).reason == "queue 37 > 10 × 3 for 1m → 4"


def test_large_backlog_jumps_straight_to_what_it_needs() -> None:
    run = Runner(MF, current=2)
    run.tick(0, queue_depth=200, ttft_p95_s=OK_TTFT)
    assert run.tick(60, queue_depth=200, ttft_p95_s=OK_TTFT).desired == 20


def test_ttft_over_target_scales_out_by_at_least_one() -> None:
    run = Runner(MF, current=2)
    run.tick(0, queue_depth=0, ttft_p95_s=0.62)
    assert run.tick(59, queue_depth=0, ttft_p95_s=0.62).desired == 2
    fired = run.tick(61, queue_depth=0, ttft_p95_s=0.62)
    assert fired.desired == 3
    assert "TTFT p95 620ms > 500ms for 1m1s" in fired.reason


def test_lingering_ttft_breach_adds_one_instance_per_scale_out_after_not_per_tick() -> None:
    run = Runner(MF, current=2)
    run.ticks(0, 60, 1, queue_depth=0, ttft_p95_s=0.9)  # fires at 60 s, then its clock restarts
    assert run.current == 3
    run.ticks(61, 119, 1, queue_depth=0, ttft_p95_s=0.9)
    assert run.current == 3
    run.tick(120, queue_depth=0, ttft_p95_s=0.9)
    assert run.current == 4


def test_ttft_at_the_target_is_not_over() -> None:
    run = Runner(MF, current=2)
    assert run.ticks(0, 300, 10, queue_depth=0, ttft_p95_s=0.5).desired == 2


def test_current_zero_with_work_waiting_counts_as_over_threshold() -> None:
    run = Runner(spec(kind="min-floor", mode="thresholds", floor=0), current=0)
    run.tick(0, queue_depth=1)
    assert run.tick(59, queue_depth=1).desired == 0
    assert run.tick(60, queue_depth=1).desired == 1


def test_quiet_for_4m59s_holds_and_5m01s_scales_in_toward_need() -> None:
    run = Runner(MF, current=6)
    run.tick(0, queue_depth=25, ttft_p95_s=OK_TTFT)
    held = run.tick(299, queue_depth=25, ttft_p95_s=OK_TTFT)
    assert held.desired == 6
    assert "scale in after 5m" in held.reason
    shrunk = run.tick(301, queue_depth=25, ttft_p95_s=OK_TTFT)
    assert shrunk.desired == 3  # ceil(25 / 10)
    assert shrunk.reason.startswith("queue 25 ≤ 10 × 3 and TTFT p95 200ms ≤ 500ms for 5m1s → 3")


def test_never_below_the_floor() -> None:
    run = Runner(MF, current=6)
    last = run.ticks(0, 3600, 10, queue_depth=0, ttft_p95_s=OK_TTFT)
    assert last.desired == 2
    assert min(d.desired for d in run.decisions) == 2


def test_below_the_floor_is_raised_at_once() -> None:
    run = Runner(MF, current=0)
    decision = run.tick(0, queue_depth=0, ttft_p95_s=OK_TTFT)
    assert decision.desired == 2
    assert "floor 2" in decision.reason


def test_scale_in_sizes_for_the_peak_queue_of_the_window() -> None:
    run = Runner(MF, current=6)
    run.ticks(0, 120, 10, queue_depth=32, ttft_p95_s=OK_TTFT)
    run.ticks(130, 290, 10, queue_depth=0, ttft_p95_s=OK_TTFT)
    shrunk = run.tick(301, queue_depth=0, ttft_p95_s=OK_TTFT)
    assert shrunk.desired == 4  # ceil(32 / 10), not the floor
    assert "peak queue 32" in shrunk.reason


def test_cooldown_guards_scale_in_after_a_recent_change() -> None:
    policy = spec(
        kind="min-floor",
        mode="thresholds",
        floor=1,
        queue_per_instance=10,
        scale_in_after="5m",
        cooldown="10m",
        scale_in_step=100,
    )
    run = Runner(policy, current=2)
    run.tick(0, queue_depth=50)
    assert run.tick(60, queue_depth=50).desired == 5  # change at t=60
    run.tick(70, queue_depth=5)
    blocked = run.tick(371, queue_depth=5)  # quiet 5m1s, but changed 5m11s ago
    assert blocked.desired == 5
    assert "cooldown 10m" in blocked.reason
    assert run.tick(659, queue_depth=5).desired == 5
    assert run.tick(661, queue_depth=5).desired == 1


def test_cooldown_never_slows_scale_out() -> None:
    policy = spec(
        kind="min-floor",
        mode="thresholds",
        floor=1,
        queue_per_instance=10,
        scale_out_after="60s",
        cooldown="30m",
        scale_in_step=100,
    )
    run = Runner(policy, current=1)
    run.tick(0, queue_depth=30)
    assert run.tick(60, queue_depth=30).desired == 3
    run.tick(61, queue_depth=80)
    assert run.tick(121, queue_depth=80).desired == 8


def test_queue_that_fits_exactly_current_holds_no_flapping() -> None:
    run = Runner(MF, current=3)
    assert run.ticks(0, 3600, 10, queue_depth=25, ttft_p95_s=OK_TTFT).desired == 3
    assert {d.desired for d in run.decisions} == {3}


def test_unknown_queue_holds_and_names_the_signal_but_ttft_still_scales_out() -> None:
    run = Runner(MF, current=4)
    held = run.ticks(0, 900, 10, queue_depth=None, ttft_p95_s=OK_TTFT)
    assert held.desired == 4
    assert "queue_depth unknown" in held.reason
    run.tick(1000, queue_depth=None, ttft_p95_s=0.8)
    assert run.tick(1060, queue_depth=None, ttft_p95_s=0.8).desired == 5


def test_unknown_ttft_blocks_scale_in_but_queue_still_scales_out() -> None:
    run = Runner(MF, current=4)
    held = run.ticks(0, 900, 10, queue_depth=0, ttft_p95_s=None)
    assert held.desired == 4
    assert "ttft_p95_s unknown" in held.reason
    run.tick(1000, queue_depth=90, ttft_p95_s=None)
    assert run.tick(1060, queue_depth=90, ttft_p95_s=None).desired == 9


def test_an_idle_engine_has_no_ttft_and_still_scales_in() -> None:
    """vLLM records no TTFT while nothing runs: that is not missing data. The daemon's idle tier used to hold
    forever (TTFT unknown), while the simulator scaled it in."""
    run = Runner(MF, current=4)
    idle = {"queue_depth": 0, "ttft_p95_s": None, "requests_running": 0, "requests_waiting": 0, "arrivals": 0}
    done = run.ticks(0, 900, 10, **idle)
    assert done.desired == 2 and "no requests (no TTFT)" in done.reason
    busy = Runner(MF, current=4)  # requests running but no TTFT read: unknown, hold as before
    held = busy.ticks(0, 900, 10, queue_depth=0, ttft_p95_s=None, requests_running=5, requests_waiting=0, arrivals=3)
    assert held.desired == 4 and "ttft_p95_s unknown" in held.reason


def test_ttft_not_configured_means_queue_alone_decides() -> None:
    run = Runner(spec(kind="min-floor", mode="thresholds", floor=1, scale_in_step=100), current=3)
    run.tick(0, queue_depth=0)
    assert run.tick(301, queue_depth=0).desired == 1


def test_max_caps_scale_out_and_the_reason_says_so() -> None:
    run = Runner(MF, bounds=Bounds(min=1, max=5), current=3)
    run.tick(0, queue_depth=200, ttft_p95_s=OK_TTFT)
    capped = run.tick(60, queue_depth=200, ttft_p95_s=OK_TTFT)
    assert capped.desired == 5
    assert capped.reason.endswith("capped at tier max 5 → 5")


def test_without_capacity_figures_scale_in_steps_down_one_at_a_time() -> None:
    """A healthy fleet reads queue 0; jumping to ceil(0 / qpi) would drop busy instances. Step instead."""
    policy = spec(
        kind="min-floor", mode="thresholds", floor=1, queue_per_instance=10, scale_in_after="5m", cooldown="5m"
    )
    run = Runner(policy, current=6)
    run.tick(0, queue_depth=0)
    first = run.tick(301, queue_depth=0)
    assert first.desired == 5
    assert "step 1" in first.reason
    run.current = 5
    assert run.tick(400, queue_depth=0).desired == 5  # a new window (and the cooldown) before the next step
    assert run.tick(602, queue_depth=0).desired == 4


def test_scale_in_keeps_the_instances_the_work_in_flight_needs() -> None:
    policy = spec(
        kind="min-floor",
        mode="thresholds",
        floor=1,
        queue_per_instance=10,
        scale_in_after="5m",
        cooldown="5m",
        in_flight_per_instance=60,
    )
    run = Runner(policy, current=8)
    run.tick(0, queue_depth=0, requests_running=230)
    run.tick(150, queue_depth=0, requests_running=290)  # the window's peak
    shrunk = run.tick(301, queue_depth=0, requests_running=200)
    assert shrunk.desired == 5  # ceil(290 / 60), not the floor
    assert "290 in flight need 5" in shrunk.reason


def test_in_flight_rule_holds_when_in_flight_is_unknown() -> None:
    policy = spec(kind="min-floor", mode="thresholds", floor=1, queue_per_instance=10, in_flight_per_instance=60)
    run = Runner(policy, current=4)
    run.tick(0, queue_depth=0)
    held = run.tick(400, queue_depth=0)
    assert held.desired == 4
    assert "in-flight work unknown" in held.reason


def test_a_window_that_sheds_nothing_starts_afresh_so_old_peaks_expire() -> None:
    policy = spec(
        kind="min-floor",
        mode="thresholds",
        floor=1,
        queue_per_instance=10,
        scale_in_after="5m",
        cooldown="5m",
        in_flight_per_instance=60,
    )
    run = Runner(policy, current=6)
    run.tick(0, queue_depth=0, requests_running=350)  # the day's peak: 6 needed
    held = run.tick(301, queue_depth=0, requests_running=100)
    assert held.desired == 6 and "350 in flight need 6" in held.reason
    # load stays low; the next window no longer remembers 350
    shrunk = run.tick(602, queue_depth=0, requests_running=100)
    assert shrunk.desired == 3  # 100 in flight need 2, but at most half the fleet goes per window
    assert "100 in flight need 2; at most 3 per window" in shrunk.reason


def test_a_ttft_breach_waits_for_instances_still_booting_but_the_queue_rule_does_not() -> None:
    run = Runner(MF, current=4)
    run.tick(0, booting=2, queue_depth=0, ttft_p95_s=0.9)
    held = run.tick(61, booting=2, queue_depth=0, ttft_p95_s=0.9)
    assert held.desired == 4 and "2 instance(s) still booting" in held.reason
    fired = run.tick(62, booting=0, queue_depth=0, ttft_p95_s=0.9)  # they came up; TTFT is still over
    assert fired.desired == 5
    run.current = 5
    run.tick(200, booting=1, queue_depth=120, ttft_p95_s=0.9)
    queue = run.tick(261, booting=1, queue_depth=120, ttft_p95_s=0.9)
    assert queue.desired == 12  # ceil(120 / 10): the queue rule sizes absolutely, booting or not


def test_a_ttft_breach_adds_a_share_of_a_large_fleet_at_once() -> None:
    run = Runner(MF, current=10)
    run.tick(0, queue_depth=0, ttft_p95_s=0.9)
    assert run.tick(61, queue_depth=0, ttft_p95_s=0.9).desired == 12  # +20% of 10, not +1
    small = Runner(MF, current=3)
    small.tick(0, queue_depth=0, ttft_p95_s=0.9)
    assert small.tick(61, queue_depth=0, ttft_p95_s=0.9).desired == 4  # at least one
