"""Target tracking: every rule at its boundaries (stabilisation window, deficit sizing, idle, unknown load)."""

from __future__ import annotations

import pytest

from scalectl.policies.types import Bounds, PolicyState
from tests.unit.policies.helpers import Runner, spec

# capacity 100 in flight per instance × 0.85 = 85 per instance; no learning, no tolerance, no hedged launches:
# plain arithmetic
PLAIN = {
    "kind": "min-floor",
    "floor": 1,
    "capacity": 100,
    "target_utilization": 0.85,
    "learn_capacity": False,
    "tolerance": 0,
    "hedge_launches": False,
}


def runner(current: int, **fields: object) -> Runner:
    return Runner(spec(**{**PLAIN, **fields}), bounds=Bounds(min=1, max=40), current=current)


def vllm(in_flight: float, waiting: float = 0.0, **more: float | None) -> dict[str, float | None]:
    """What a vLLM tier's reading holds: gauges and TTFT, no Celery queue (an HTTP-only tier)."""
    return {"requests_running": in_flight - waiting, "requests_waiting": waiting, "ttft_p95_s": 0.2, **more}


def test_scale_out_is_sized_to_the_deficit_in_one_tick() -> None:
    run = runner(current=4)
    decision = run.tick(0, **vllm(850))
    assert decision.desired == 10  # ceil(850 / 85), not 4 + 1
    assert decision.reason == "load 850 in flight ÷ (100 × 0.85) → 10"


def test_a_need_that_fits_exactly_holds() -> None:
    assert runner(current=10).tick(0, **vllm(850)).desired == 10
    assert runner(current=10).tick(0, **vllm(851)).desired == 11


def _quiet_after_busy(run: Runner) -> None:
    for t in range(-400, 1, 10):  # a full window of known, busy load: need 10
        run.tick(t, **vllm(850))
    assert run.current == 10


@pytest.mark.parametrize(("at", "expected"), [(299, 10), (301, 5)])
def test_scale_in_waits_for_the_busy_need_to_leave_the_5_minute_window(at: int, expected: int) -> None:
    run = runner(current=10)
    _quiet_after_busy(run)
    for t in range(10, at, 10):
        assert run.tick(t, **vllm(170)).desired == 10  # need 2, but the window still holds 10
    decision = run.tick(at, **vllm(170))
    assert decision.desired == expected  # 5:01: the highest need is 2; at most half the fleet per step
    if expected < 10:
        assert "highest need over 5m 2; at most 5 per 1m" in decision.reason


def test_scale_in_steps_at_a_bounded_rate_to_the_window_need() -> None:
    run = runner(current=10)
    _quiet_after_busy(run)
    seen = [run.tick(t, **vllm(170)).desired for t in range(10, 500, 10)]
    assert seen[seen.index(5) :].count(5) == 6  # 60 s between steps (ticks 301..351)
    assert seen[-1] == 2  # 10 → 5 → 3 → 2 (the need), never below it


def test_scale_in_keeps_the_highest_need_of_the_window_not_the_last_sample() -> None:
    run = runner(current=10)
    _quiet_after_busy(run)
    for t in range(10, 301, 10):
        run.tick(t, **vllm(500 if t == 200 else 170))  # one busy moment at 200 s: need 6
    assert run.tick(310, **vllm(170)).desired == 6
    assert "highest need over 5m 6" in run.decisions[-1].reason


def test_tolerance_keeps_a_load_at_a_boundary_from_flapping() -> None:
    run = runner(current=10, tolerance=0.1)
    _quiet_after_busy(run)
    for t in range(10, 700, 10):
        run.tick(t, **vllm(740))  # need ceil(740 / 85) = 9, but 10 with 10% on top
    assert run.current == 10
    assert "→ 9; highest need over 5m, load +10% 10 → hold 10" in run.decisions[-1].reason


def test_an_http_only_tier_scales_in() -> None:
    """No Celery queue at all: vLLM's gauges are the load, so quiet TTFT and little in flight scale in."""
    run = runner(current=8)
    for t in range(0, 1200, 15):
        run.tick(t, requests_running=40, requests_waiting=0, ttft_p95_s=0.1)
    assert run.current == 1


def test_no_work_at_all_for_the_idle_window_returns_to_the_floor_at_once() -> None:
    run = Runner(spec(**{**PLAIN, "floor": 2}), bounds=Bounds(min=0, max=40), current=8)
    for t in range(0, 300, 10):
        assert run.tick(t, **vllm(0), request_rate=0).desired == 8
    decision = run.tick(300, **vllm(0), request_rate=0)
    assert decision.desired == 2
    assert decision.reason == "no work at all for 5m → floor 2"


def test_a_burst_s_decaying_average_does_not_keep_an_idle_tier_busy() -> None:
    """After a burst the per-tick arrivals' average decays for minutes; once nothing arrives in the reading
    window nor in the tick, the tier is idle and returns to its floor after ``idle_after``."""
    run = Runner(spec(**{**PLAIN, "floor": 0, "idle_after": 30}), bounds=Bounds(min=0, max=40), current=0)
    for t in range(0, 60, 10):
        run.tick(t, **vllm(50), request_rate=50, arrivals=500)
    assert run.current == 1
    for t in range(60, 120, 10):  # the window still counts the burst: one instance stays
        assert run.tick(t, **vllm(0), request_rate=5, arrivals=0).desired == 1
    decisions = [run.tick(t, **vllm(0), request_rate=0, arrivals=0) for t in range(120, 160, 10)]
    assert [d.desired for d in decisions] == [1, 1, 1, 0]  # idle from 120 s; 30 s later, at 150 s: the floor
    assert decisions[-1].reason == "no work at all for 30s → floor 0"


@pytest.mark.parametrize(
    ("signals", "why"),
    [
        ({}, "no vLLM or queue figures"),
        ({"requests_running": 40.0}, "num_requests_waiting missing"),
        ({"queue_depth": 3.0}, "Celery in-flight count missing"),
    ],
)
def test_unknown_load_holds_never_scales_in_and_says_so(signals: dict[str, float], why: str) -> None:
    run = runner(current=6)
    for t in range(0, 1800, 15):
        decision = run.tick(t, **signals)
        assert decision.desired == 6
    assert why in decision.reason and "no scale-in on missing data" in decision.reason


def test_unknown_load_never_goes_to_zero() -> None:
    run = Runner(spec(**{**PLAIN, "floor": 0}), bounds=Bounds(min=0, max=40), current=3)
    for t in range(0, 1800, 15):
        assert run.tick(t).desired == 3


def test_a_gap_in_the_load_restarts_the_window() -> None:
    run = runner(current=10)
    _quiet_after_busy(run)
    for t in range(10, 300, 10):
        run.tick(t, **vllm(170))
    run.tick(300)  # unknown
    for t in range(310, 600, 10):
        assert run.tick(t, **vllm(170)).desired == 10, t  # a full window of known load is needed again
    assert "load known for 4m40s of the 5m window" in run.decisions[-1].reason  # known again since 310 s
    assert run.tick(610, **vllm(170)).desired == 5


def test_a_ttft_breach_the_load_does_not_explain_adds_what_the_waiting_requests_need() -> None:
    run = runner(current=10)
    decision = run.tick(0, **vllm(800, waiting=170, ttft_p95_s=0.9))
    assert decision.desired == 12  # need 10 = current; 170 waiting need 2 more
    assert "TTFT p95 900ms > 500ms with 170 waiting: +2" in decision.reason


def test_the_tail_held_is_p99_by_default_and_p95_stands_in_where_no_p99_is_given() -> None:
    # p95 within the target, p99 over it: 1-5% of the window missed, which a 99.5% SLO cannot afford
    decision = runner(current=10).tick(0, **vllm(800, waiting=170, ttft_p95_s=0.3, ttft_p99_s=0.9))
    assert decision.desired == 12 and "TTFT p99 900ms > 500ms with 170 waiting: +2" in decision.reason
    within = runner(current=10).tick(0, **vllm(800, waiting=170, ttft_p95_s=0.3, ttft_p99_s=0.5))
    assert within.desired == 10  # at the target exactly: held
    only_p95 = runner(current=10).tick(0, **vllm(800, waiting=170, ttft_p95_s=0.9, ttft_p99_s=None))
    assert only_p95.desired == 12 and "TTFT p95 900ms" in only_p95.reason
    p95_held = runner(current=10, ttft_quantile=0.95).tick(0, **vllm(800, waiting=170, ttft_p95_s=0.3, ttft_p99_s=0.9))
    assert p95_held.desired == 10  # `ttft_quantile: 0.95` holds p95 only


@pytest.mark.parametrize(("in_flight", "expected"), [(169, 10), (170, 11)])
def test_a_breach_with_nothing_waiting_on_a_quiet_fleet_is_slow_requests_not_too_few_instances(
    in_flight: int, expected: int
) -> None:
    """10 instances × 85 = 850 in flight at the target utilisation; a fifth of it is 170. Under it, with
    nothing waiting, a breach adds nothing (and holds); at it, the breach adds one as before."""
    run = runner(current=10)
    decision = run.tick(0, **vllm(in_flight, ttft_p95_s=0.3, ttft_p99_s=0.9))
    assert decision.desired == expected
    if expected == 10:
        assert "nothing waiting, the fleet under 20% busy: slow requests, not too few instances → hold 10" in (
            decision.reason
        )


def test_a_breach_adds_nothing_while_instances_boot() -> None:
    run = runner(current=10)
    decision = run.tick(0, booting=2, **vllm(800, waiting=170, ttft_p95_s=0.9))
    assert decision.desired == 10
    assert "2 instance(s) still booting" in decision.reason


def test_with_a_service_time_the_reason_is_in_requests_per_second() -> None:
    run = runner(current=2)
    for t in range(0, 120, 10):  # 100 in flight at 40 req/s: 2.5 s per request
        run.tick(t, **vllm(100), request_rate=40, arrivals=400)
    decision = run.tick(120, **vllm(100), request_rate=160, arrivals=1600)  # in flight has not caught up yet
    assert decision.desired == 5  # 160 × 2.5 = 400 in flight ÷ 85 → 5
    assert decision.reason == "load 160 req/s ÷ (40 req/s × 0.85) → 5"


def test_the_last_ticks_arrivals_lead_the_reading_window() -> None:
    run = runner(current=2)
    for t in range(0, 120, 10):
        run.tick(t, **vllm(100), request_rate=40, arrivals=400)
    decision = run.tick(120, **vllm(100), request_rate=45, arrivals=1600)  # the window has barely moved
    # The tick's own count: 1,600 in 10 s is at least (1600 − 2·40) / 10 = 152 req/s beyond chance;
    # × 2.5 s = 380 in flight ÷ 85 → 5, in the spike's first tick
    assert decision.desired == 5
    assert "load 152 req/s ÷ (40 req/s × 0.85) (a burst: 1600 arrivals this tick) → 5" in decision.reason


@pytest.mark.parametrize(("arrivals", "burst"), [(430, None), (470, "42.7 req/s")])
def test_a_tick_counts_as_a_burst_only_beyond_poisson_noise(arrivals: int, burst: str | None) -> None:
    """At 40 req/s a 10-s tick counts 400 ± 20: 430 is chance (its low edge, 38.9 req/s, is under the
    window's rate) and is no burst; 470 is a burst of at least (470 − 2·21.7) / 10 = 42.7 req/s."""
    run = runner(current=2)
    for t in range(0, 120, 10):
        run.tick(t, **vllm(100), request_rate=40, arrivals=400)
    decision = run.tick(120, **vllm(100), request_rate=40, arrivals=arrivals)
    if burst is None:
        assert "a burst" not in decision.reason
    else:
        assert f"load {burst} ÷" in decision.reason and f"(a burst: {arrivals} arrivals this tick)" in decision.reason


def test_a_burst_scales_the_compute_need_by_as_much_as_the_rate() -> None:
    run = Runner(spec(**PLAIN), bounds=Bounds(min=1, max=40), current=2, compute_prior=100_000)
    for t in range(0, 120, 10):
        run.tick(t, **vllm(10), request_rate=10, arrivals=100, prompt_tokens_rate=150_000)
    decision = run.tick(120, **vllm(10), request_rate=10, arrivals=400, prompt_tokens_rate=150_000)
    # 400 in 10 s: ≥ 36 req/s, 3.6× the window's 10: 150k tokens/s × 3.6 ÷ (100k × 0.85) → 7 (2 without)
    assert decision.desired == 7
    assert "compute 150k tokens/s × 3.6 ÷ (100k × 0.85)" in decision.reason


def test_threshold_settings_without_threshold_mode_are_refused() -> None:
    with pytest.raises(ValueError, match="queue_per_instance only apply to `mode: thresholds`"):
        spec(kind="min-floor", queue_per_instance=50)
    assert spec(kind="min-floor", mode="thresholds", queue_per_instance=50) is not None


def test_a_breach_sizes_its_backlog_to_drain_in_two_minutes_once_the_service_time_is_known() -> None:
    run = runner(current=10)
    for t in range(0, 120, 10):  # 850 in flight at 340 req/s: 2.5 s per request; 10 instances needed
        run.tick(t, **vllm(850), request_rate=340, arrivals=3400)
    decision = run.tick(120, **vllm(850 + 3000, waiting=3000, ttft_p95_s=4.0), request_rate=340, arrivals=3400)
    # 3,000 waiting ÷ (34 req/s per instance × 120 s) → +1, not 3,000 ÷ 85 = +36 instances
    assert decision.desired == 11
    assert "TTFT p95 4000ms > 500ms with 3000 waiting: +1 → 11" in decision.reason


def test_scale_in_stops_at_a_small_fleet_size_that_breached_at_this_load() -> None:
    """A large fleet's capacity says one instance carries the night; one instance breached there before,
    so the scale-in stops at two (and says nothing new: the reason is the window's)."""
    from dataclasses import replace

    from scalectl.policies.capacity import observe
    from tests.unit.policies.helpers import T0

    learned: dict[str, float] = {}
    for i in range(12):  # an hour ago: one instance, settled, breaching at 60 in flight (the prior is 100)
        learned = observe(learned, now=T0 - 3600 + i * 70.0, prior=100, load=60.0, ready=1, ttft=2.0, target=0.5)
    fields = {**PLAIN, "floor": 1, "learn_capacity": True, "stabilization": 60, "scale_in_period": 15}
    run = Runner(spec(**fields), bounds=Bounds(min=1, max=40), current=2)
    run.state = replace(run.state, learned=learned)
    for t in range(0, 400, 10):
        run.tick(t, **vllm(60))  # need 1 by the pooled capacity (85 per instance)
    assert run.current == 2
    fresh = Runner(spec(**fields), bounds=Bounds(min=1, max=40), current=2)
    for t in range(0, 400, 10):
        fresh.tick(t, **vllm(60))
    assert fresh.current == 1  # without that memory it goes to one


# ---- compute: long prompts run out of prefill compute before they fill the sequence slots ----------------
def compute_runner(current: int) -> Runner:
    # 10,000 tokens/s per instance × 0.85 = 8,500 per instance
    return Runner(spec(**PLAIN), bounds=Bounds(min=1, max=40), current=current, compute_prior=10_000.0)


def test_the_token_rate_sizes_the_fleet_when_compute_runs_out_first() -> None:
    decision = compute_runner(current=2).tick(0, **vllm(170, prompt_tokens_rate=40_000, generation_tokens_rate=2_500))
    assert decision.desired == 5  # in flight needs 2; (40,000 + 2,500) / 8,500 = 5
    assert decision.reason == ("load 170 in flight ÷ (100 × 0.85) → 2; compute 42.5k tokens/s ÷ (10k × 0.85) → 5")
    assert compute_runner(current=2).tick(0, **vllm(170, prompt_tokens_rate=42_500.5)).desired == 6


def test_prompt_tokens_found_in_the_prefix_cache_cost_no_compute() -> None:
    decision = compute_runner(current=2).tick(0, **vllm(170, prompt_tokens_rate=40_000, prefix_cache_hit_rate=0.75))
    assert decision.desired == 2  # 10,000 computed tokens/s need 2, as the in-flight load does


def test_an_unknown_token_rate_leaves_the_in_flight_need_alone() -> None:
    decision = compute_runner(current=2).tick(0, **vllm(170))
    assert decision.desired == 2 and "compute" not in decision.reason


def test_the_compute_need_holds_scale_in_like_any_need() -> None:
    run = compute_runner(current=5)
    for t in range(0, 700, 10):  # in flight says 2 all along; compute says 5
        assert run.tick(t, **vllm(170, prompt_tokens_rate=42_500)).desired == 5


def test_a_bursts_queue_of_a_few_seconds_teaches_no_knee() -> None:
    """Twenty instances carry 10 requests each on average; every minute a burst of a trace piles 45 each
    into the engines for a tick and the p99 breaches. The TTFT quantile describes the window, whose load
    is the average: learning the burst's in-flight count as the knee would size the day at a third."""
    from scalectl.policies.capacity import estimate

    fields = {**PLAIN, "learn_capacity": True, "ttft_quantile": 0.99}
    run = Runner(spec(**fields), bounds=Bounds(min=1, max=40), current=20)
    for t in range(0, 3600, 10):
        burst = t % 60 == 30
        run.tick(t, current=20, **vllm(900 if burst else 200, ttft_p99_s=2.0 if burst else 0.3),
                 request_rate=200, arrivals=2000)  # fmt: skip
    assert run.state.learned.get("svc.time") == pytest.approx(1.0)
    assert estimate(run.state.learned, 100).per_instance == 100


def test_a_cold_fleet_under_traffic_sizes_on_the_rate_not_the_backlog_in_flight() -> None:
    """One instance meets 150 req/s before any service time is learned: 100 run, 3,000 wait in its engine.
    What runs finishes at 10 per second, so a request is 100 ÷ 10 = 10 s in service: 150 req/s × 10 s =
    1,500 in flight ÷ 85 → 18, not the 3,100 in flight ÷ 85 → 37 the backlog would ask for."""
    run = runner(current=1)
    decision = run.tick(0, **vllm(3100, waiting=3000), request_rate=150, finish_rate=10)
    assert decision.desired == 18
    assert decision.reason == (
        "load 150 req/s ÷ (10 req/s × 0.85) (service time 10.0 s while requests wait: the least running ÷"
        " finished seen; now 100 ÷ 10 req/s) → 18"
    )
    # Without the finish rate it is the requests in flight, backlog and all, as before.
    assert runner(current=1).tick(0, **vllm(3100, waiting=3000), request_rate=150).desired == 37


def test_the_waiting_service_time_keeps_its_shortest_reading_and_never_sizes_above_in_flight() -> None:
    run = runner(current=1)
    run.tick(0, **vllm(3100, waiting=3000), request_rate=150, finish_rate=10)  # 10 s
    # New instances just took 300 requests each and have finished few: 900 ÷ 20 = 45 s reads long; 10 s holds.
    decision = run.tick(5, current=4, **vllm(4000, waiting=3100), request_rate=150, finish_rate=20)
    assert "service time 10.0 s" in decision.reason and decision.desired == 18
    # A stand-in that would size above what is in flight is not used: 300 in flight ÷ 85 → 4.
    small = runner(current=1).tick(0, **vllm(300, waiting=200), request_rate=150, finish_rate=10)
    assert small.desired == 4 and "service time" not in small.reason


@pytest.mark.parametrize(("waiting_now", "expected"), [(2990, 10), (3000, 11), (3100, 11)])
def test_a_breach_adds_nothing_while_its_backlog_shrinks(waiting_now: int, expected: int) -> None:
    """A backlog waits in the engines that took it; a new instance takes only new arrivals. While fewer wait
    than a tick ago the backlog is being served, and the breach holds; as many or more: it adds."""
    run = runner(current=10)
    for t in range(0, 120, 10):  # 850 in flight at 340 req/s: 2.5 s per request; 10 instances needed
        run.tick(t, **vllm(850), request_rate=340, arrivals=3400)
    run.tick(120, **vllm(850 + 3000, waiting=3000, ttft_p95_s=4.0), request_rate=340, arrivals=3400, current=10)
    decision = run.tick(
        130, current=10, **vllm(850 + waiting_now, waiting=waiting_now, ttft_p95_s=4.0), request_rate=340, arrivals=3400
    )
    assert decision.desired == expected
    if expected == 10:
        assert "2990 waiting, fewer than a tick ago: a backlog being served → hold 10" in decision.reason


def test_a_backlogs_minutes_of_wait_read_in_seconds_in_the_reason() -> None:
    decision = runner(current=10).tick(0, **vllm(800, waiting=170, ttft_p95_s=1016.76))
    assert "TTFT p95 1016.8s > 500ms with 170 waiting: +2" in decision.reason
    assert "TTFT p95 9999ms" in runner(current=10).tick(0, **vllm(800, waiting=170, ttft_p95_s=9.999)).reason


def test_a_tier_short_now_hedges_its_launches_and_cancels_the_rest_once_the_deficit_serves() -> None:
    """850 in flight on 4 ready: 10 needed, and the work is 8.5 instances' worth at full capacity, more than
    the 4 carry. It launches the deficit twice over; once 10 serve, the 6 still booting are cancelled."""
    run = runner(current=4, hedge_launches=True)
    decision = run.tick(0, **vllm(850))
    assert decision.desired == 16
    assert decision.reason.endswith("→ 10; short now: +6 hedged launch(es), cancelled once 10 serve → 16")
    held = run.tick(5, booting=12, **vllm(850))
    assert held.desired == 16 and held.reason.endswith("4 of the 10 launched for ready → hold 16")
    covered = run.tick(10, booting=6, **vllm(850))
    assert covered.desired == 10
    assert covered.reason.endswith(
        "10 ready serve the 10 launched for: the 6 hedged launch(es) still booting are cancelled → 10"
    )
    assert runner(current=4).tick(0, **vllm(850)).desired == 10  # hedge_launches: false


@pytest.mark.parametrize(
    ("booting", "settled"),
    [
        (0, "the 6 hedged launch(es) that served too are retired → 10"),
        (2, "the 2 hedged launch(es) still booting are cancelled and the 4 hedged launch(es) that served too are"
         " retired → 10"),
    ],
)  # fmt: skip
def test_hedged_launches_that_served_with_the_deficit_go_at_once(booting: int, settled: str) -> None:
    """All 16, or all but 2, boot in the same tick: the 6 launched beyond the deficit go at once, named as
    hedges (not a scale-in through the window's minutes), those still booting first."""
    run = runner(current=4, hedge_launches=True)
    assert run.tick(0, **vllm(850)).desired == 16
    decision = run.tick(5, booting=booting, **vllm(850))
    assert decision.desired == 10 and decision.reason.endswith(settled)
    assert run.tick(10, **vllm(850)).desired == 10  # settled: the next tick holds


def test_a_need_the_ready_instances_still_carry_is_not_hedged() -> None:
    """A ramp: 850 in flight on 9 ready is 8.5 instances' worth at full capacity; they carry it while the
    tenth boots."""
    decision = runner(current=9, hedge_launches=True).tick(0, **vllm(850))
    assert decision.desired == 10 and "hedged" not in decision.reason


@pytest.mark.parametrize(("boots", "expected"), [((180, 182, 185, 190), 10), ((120, 200, 250, 300), 16)])
def test_boots_measured_close_together_are_not_hedged(boots: tuple[float, ...], expected: int) -> None:
    """Twice as many launches land sooner only when boot times spread: p90 under 1.25 × p10, nothing is."""
    run = runner(current=4, hedge_launches=True)
    run.state = PolicyState(learned={f"boot.s.{i}": b for i, b in enumerate(boots)})
    assert run.tick(0, **vllm(850)).desired == expected


def test_a_cold_fleet_hedges_the_launches_it_sizes_on_the_rate() -> None:
    run = runner(current=1, hedge_launches=True)
    decision = run.tick(0, **vllm(3100, waiting=3000), request_rate=150, finish_rate=10)
    assert decision.desired == 35  # 18 for 150 req/s at 10 s each, and 17 more while the deficit boots
    assert "short now: +17 hedged launch(es), cancelled once 18 serve → 35" in decision.reason


def _uncured(run: Runner) -> None:
    """2 ready instances at 80 in flight breach p99 600 ms with nothing waiting (+1 → 3); on 3, each carrying
    two thirds of the work, the tail is as far over: the breach is not capacity."""
    first = run.tick(0, **vllm(80, ttft_p99_s=0.6))
    assert first.desired == 3 and "TTFT p99 600ms > 500ms with 0 waiting: +1" in first.reason
    found = run.tick(10, **vllm(80, ttft_p99_s=0.6))
    assert found.desired == 3
    assert "TTFT p99 600ms > 500ms with nothing waiting, as at 2 ready (600ms) with 1.5× the work each" in (
        found.reason
    )


def test_a_tail_more_instances_did_not_cure_neither_walks_nor_holds_the_fleet() -> None:
    run = runner(current=2)
    _uncured(run)
    excused = run.tick(20, **vllm(80, ttft_p99_s=0.62))
    assert excused.desired == 3
    assert "the tail more instances did not cure (600ms), not capacity" in excused.reason
    seen = [run.tick(t, **vllm(80, ttft_p99_s=0.62)).desired for t in range(30, 400, 10)]
    # no hold while it breaches: once the window passes, back towards the need (80 ÷ 85 → 1), but only to 2,
    # the fleet it was seen at; one instance would carry twice that work, more than a quarter over it
    assert seen[-1] == 2
    assert "no fewer than 2 (each at most 25% busier than where that tail held)" in run.decisions[-1].reason


def test_an_uncured_tail_lets_the_fleet_shrink_a_quarter_more_work_each_at_a_time() -> None:
    """8 ready at 340 in flight (4 instances' worth) breach; 10 breach as much. The tail held at half an
    instance's work each: the fleet may shrink until each carries 25% more (7), and once 7 have held a
    minute within the tail, 25% more than that (6), and so on to the need (4)."""
    run = runner(current=8)
    for t in (0, 10, 20):
        run.tick(t, **vllm(340, ttft_p99_s=0.6))
    assert run.current == 10 and "not capacity" in run.decisions[-1].reason
    seen = [run.tick(t, **vllm(340, ttft_p99_s=0.6)).desired for t in range(30, 3600, 10)]
    steps = [n for i, n in enumerate(seen) if i == 0 or n != seen[i - 1]]
    assert steps == [10, 7, 6, 5, 4]


def test_an_uncured_tail_that_grows_as_the_fleet_shrinks_is_a_breach_again() -> None:
    run = runner(current=8)
    for t in (0, 10, 20):
        run.tick(t, **vllm(340, ttft_p99_s=0.6))
    for t in range(30, 400, 10):
        run.tick(t, **vllm(340, ttft_p99_s=0.6))
    assert run.current == 7
    decision = run.tick(400, **vllm(340, ttft_p99_s=0.64))  # 7 carry more: the tail 6.7% over the uncured one
    assert decision.desired == 8 and "with 0 waiting: +1" in decision.reason


def test_a_tail_more_instances_cured_keeps_walking() -> None:
    run = runner(current=2)
    run.tick(0, **vllm(80, ttft_p99_s=0.6))
    cured = run.tick(10, **vllm(80, ttft_p99_s=0.574))  # 74 ms over, under three quarters of 100: cured
    assert cured.desired == 4 and "with 0 waiting: +1" in cured.reason
    assert "not capacity" not in cured.reason


@pytest.mark.parametrize(("p99", "expected"), [(0.63, 3), (0.631, 4)])
def test_an_uncured_tail_excuses_breaches_up_to_a_twentieth_above_it(p99: float, expected: int) -> None:
    run = runner(current=2)
    _uncured(run)
    assert run.tick(20, **vllm(80, ttft_p99_s=p99)).desired == expected


def test_requests_waiting_are_never_excused_by_an_uncured_tail() -> None:
    run = runner(current=2)
    _uncured(run)
    decision = run.tick(20, **vllm(80, waiting=5, ttft_p99_s=0.6))
    assert decision.desired == 4 and "with 5 waiting: +1" in decision.reason


@pytest.mark.parametrize(("at", "expected"), [(75, "after a queue: the window holds its wait"), (80, "not capacity")])
def test_a_tail_read_within_a_minute_of_a_queue_tests_nothing(at: int, expected: str) -> None:
    """The window's quantile still holds the queue's wait for 60 s after the last tick with requests waiting."""
    run = runner(current=2)
    run.tick(0, **vllm(80, ttft_p99_s=0.6))  # the anchor: 2 ready
    run.tick(15, current=3, **vllm(80, waiting=5, ttft_p99_s=0.6))  # a queue at 15 s: +1 → 4
    run.tick(45, current=3, **vllm(80, ttft_p99_s=0.6))  # fewer waiting than a tick ago: held
    decision = run.tick(at, current=3, **vllm(80, ttft_p99_s=0.6))
    assert decision.desired == 3 and expected in decision.reason  # 75 s: the queue's wait; 80 s: tested, uncured


def test_an_uncured_tail_is_tested_again_after_six_hours() -> None:
    run = runner(current=2)
    _uncured(run)
    within = run.tick(6 * 3600 + 10, **vllm(80, ttft_p99_s=0.6))  # 6 h after the finding: still excused
    assert within.desired == 2 and "not capacity" in within.reason
    again = run.tick(6 * 3600 + 11, **vllm(80, ttft_p99_s=0.6))
    assert again.desired == 3 and "with 0 waiting: +1" in again.reason


def test_a_queue_under_a_tail_within_the_target_still_keeps_the_next_minute_from_testing() -> None:
    """TTFT lags a queue: a window can read within the target while requests wait, and breach after."""
    run = runner(current=2)
    run.tick(0, **vllm(80, ttft_p99_s=0.6))  # the anchor: 2 ready
    run.tick(15, current=3, **vllm(80, waiting=5, ttft_p99_s=0.4))  # a queue, the tail not yet over
    run.tick(45, current=3, **vllm(80, ttft_p99_s=0.6))  # the anchor again (0.4 ended the first)
    decision = run.tick(60, current=4, **vllm(80, ttft_p99_s=0.6))
    assert "not capacity" not in decision.reason  # 45 s after the queue: no test


@pytest.mark.parametrize(("at", "expected"), [(80, 3), (81, 4)])
def test_a_breach_with_nothing_waiting_within_a_minute_of_a_queue_is_the_queues_wait(at: int, expected: int) -> None:
    """The window's quantile holds the wait of a queue that just cleared: it adds nothing (and holds) for 60 s
    after the last tick with requests waiting, then a breach counts again."""
    run = runner(current=3)
    run.tick(0, **vllm(160, ttft_p99_s=0.4))
    run.tick(15, **vllm(160, waiting=20, ttft_p99_s=0.4))  # a queue, the tail not over yet
    run.tick(20, **vllm(160, waiting=20, ttft_p99_s=0.4))  # the last tick with requests waiting
    run.tick(50, **vllm(160, ttft_p99_s=0.4))  # cleared, the tail within the target
    decision = run.tick(at, **vllm(160, ttft_p99_s=0.9))
    assert decision.desired == expected
    if expected == 3:
        assert decision.reason.endswith(
            "TTFT p99 900ms > 500ms, nothing waiting 1m after a queue: the window holds its wait → hold 3"
        )


def _ramp_runner() -> Runner:
    return Runner(spec(**PLAIN), bounds=Bounds(min=1, max=40), current=3, compute_prior=100_000.0)


@pytest.mark.parametrize(("slope", "expected"), [(0.0, 3), (0.2, 4)])
def test_a_ramp_is_sized_where_it_will_be_when_a_launch_serves(slope: float, expected: int) -> None:
    """1,000 prompt tokens a request on 100k tokens/s per instance × 0.85: 204 req/s need 3. Rising 0.2 req/s
    each second, the rate 5m30s on (the last full minute's middle, then the 5-minute lead) is ~270: 4."""
    run = _ramp_runner()
    decision = None
    for t in range(5, 425, 5):
        rate = 204.0 + slope * (t - 420)
        decision = run.tick(t, **vllm(20), request_rate=rate, arrivals=rate * 5, prompt_tokens_rate=rate * 1000)
    assert decision is not None and decision.desired == expected
    assert ("rising 0.2 req/s each second" in decision.reason) is (slope > 0)


def test_a_tail_more_instances_did_not_cure_still_lets_the_service_time_be_learned() -> None:
    """The uncured tail is the requests' own: steady ticks under it time service (80 in flight at 40 req/s:
    2 s), so the tier sizes on its rate, not on what happens to be in flight."""
    run = runner(current=2)
    _uncured(run)
    for t in range(20, 140, 5):
        decision = run.tick(t, **vllm(80, ttft_p99_s=0.62), request_rate=40, arrivals=200)
    assert decision.reason.startswith("load 40 req/s ÷ (50 req/s × 0.85)")
