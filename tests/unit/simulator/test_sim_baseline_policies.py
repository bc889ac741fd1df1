"""The peers' rules at their boundaries: SkyServe's consecutive-decision delays, HPA's tolerance and window."""

from __future__ import annotations

import pytest

from scalectl.policies.types import Signals
from scalectl.simulator.baseline_policies import Hpa, HpaTier, SkyServe, SkyServeTier


def _rate(qps: float) -> Signals:
    return Signals(request_rate=qps)


def _skyserve(min_replicas: int = 1, max_replicas: int = 20) -> SkyServe:
    return SkyServe({"web": SkyServeTier(10.0, min_replicas, max_replicas)})


def test_skyserve_scales_up_on_the_fifteenth_consecutive_decision_over_target() -> None:
    sky = _skyserve()
    assert sky("web", 0.0, _rate(10.0), 1) == 1  # ceil(10 / 10) = 1: steady
    for i in range(1, 15):  # 14 decisions (280 s of 20 s decisions) wanting 5
        assert sky("web", 20.0 * i, _rate(45.0), 1) == 1, i
    assert sky("web", 300.0, _rate(45.0), 1) == 5  # the 15th: upscale_delay 300 s / 20 s


def test_skyserve_upscale_counter_restarts_after_a_decision_that_wants_the_same() -> None:
    sky = _skyserve()
    for i in range(14):
        sky("web", 20.0 * i, _rate(45.0), 1)
    assert sky("web", 280.0, _rate(8.0), 1) == 1  # wants 1 = target: both counters reset
    for i in range(14):
        assert sky("web", 300.0 + 20.0 * i, _rate(45.0), 1) == 1
    assert sky("web", 580.0, _rate(45.0), 1) == 5


def test_skyserve_scales_down_only_after_sixty_consecutive_decisions_and_to_the_latest_want() -> None:
    sky = _skyserve()
    for i in range(15):
        sky("web", 20.0 * i, _rate(95.0), 1)
    assert sky("web", 300.0, _rate(95.0), 10) == 10
    for i in range(1, 60):  # 59 decisions wanting fewer (the want itself changes: 3, then 2)
        assert sky("web", 300.0 + 20.0 * i, _rate(25.0 if i < 30 else 15.0), 10) == 10, i
    assert sky("web", 1500.0, _rate(15.0), 10) == 2  # the 60th: downscale_delay 1200 s / 20 s


def test_skyserve_clips_to_the_tier_bounds_and_moves_at_once_from_zero() -> None:
    sky = _skyserve(min_replicas=0, max_replicas=4)
    assert sky("web", 0.0, _rate(500.0), 0) == 4  # target 0: no hysteresis; clipped to max
    sky2 = _skyserve(min_replicas=2)
    assert sky2.wanted("web", 0.0) == 2


def _hpa(target: float = 100.0, low: int = 1, high: int = 50) -> Hpa:
    return Hpa({"web": HpaTier(target, low, high)})


def _running(n: float) -> Signals:
    return Signals(requests_running=n, requests_waiting=10_000.0)  # the waiting queue is not the metric


def test_hpa_holds_within_the_ten_percent_tolerance() -> None:
    hpa = _hpa()
    assert hpa("web", 0.0, _running(1090.0), 10) == 10  # ratio 1.09: within tolerance
    assert hpa("web", 15.0, _running(1110.0), 10) == 12  # ratio 1.11: ceil(1110 / 100)
    assert hpa("web", 30.0, _running(1092.0), 12) == 12  # ratio 0.91: within tolerance


def test_hpa_scale_up_is_rate_limited_and_bounded_by_max() -> None:
    hpa = _hpa(high=30)
    assert hpa("web", 0.0, _running(5000.0), 2) == 6  # wants 50: +4 pods per sync from 2
    assert hpa("web", 15.0, _running(5000.0), 6) == 12  # +100% from 6
    assert hpa("web", 30.0, _running(5000.0), 12) == 24
    assert hpa("web", 45.0, _running(5000.0), 24) == 30  # the tier's max


def test_hpa_scales_down_to_the_highest_recommendation_of_the_last_300_s() -> None:
    hpa = _hpa()
    assert hpa("web", 0.0, _running(2000.0), 20) == 20  # recommends 20
    assert hpa("web", 15.0, _running(500.0), 20) == 20  # recommends 5: held by the 20 of t=0
    assert hpa("web", 299.0, _running(500.0), 20) == 20  # t=0 is still inside the window (299 s ago)
    assert hpa("web", 300.0, _running(500.0), 20) == 5  # 300 s later it has left the window


def test_hpa_holds_without_a_metric_and_activates_a_batch_tier_from_zero() -> None:
    hpa = _hpa()
    assert hpa("web", 0.0, Signals(), 3) == 3  # no replica serving: the metric is unknown, not zero
    batch = Hpa({"jobs": HpaTier(8.0, 0, 40, batch=True)})
    assert batch("jobs", 0.0, Signals(queue_depth=0.0, in_flight=0.0), 0) == 0
    assert batch("jobs", 15.0, Signals(queue_depth=400.0, in_flight=0.0), 0) == 1  # KEDA activation
    assert batch("jobs", 30.0, Signals(queue_depth=392.0, in_flight=8.0), 1) == 5  # then HPA: +4
    assert batch("jobs", 45.0, Signals(queue_depth=360.0, in_flight=40.0), 5) == 10


@pytest.mark.parametrize("metric", [None, 0.0])
def test_hpa_never_goes_below_the_tier_min(metric: float | None) -> None:
    hpa = _hpa(low=3)
    assert hpa("web", 0.0, Signals(requests_running=metric), 3) == 3
