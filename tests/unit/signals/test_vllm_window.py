"""Windowed tier figures from recorded texts, checked against numpy over the raw samples."""

from __future__ import annotations

import numpy as np
import pytest

from scalectl.sources.exposition import parse_vllm_metrics
from scalectl.sources.vllm_snapshot import Histogram, VllmSnapshot
from scalectl.sources.vllm_window import VllmWindow
from tests.unit.signals.fixtures import samples, text

QUANTILES = {"ttft_p50_s": 0.50, "ttft_p95_s": 0.95, "ttft_p99_s": 0.99}


def snap(name: str, at: float) -> VllmSnapshot:
    return parse_vllm_metrics(text(name), at)


def assert_within_bucket(estimate: float | None, raw: list[float], q: float, bounds: tuple[float, ...]) -> None:
    """The histogram estimate must fall in the bucket that holds the exact quantile of the raw samples."""
    assert estimate is not None
    # inverted_cdf: the smallest sample with F(x) >= q, the same rank rule as histogram_quantile
    exact = float(np.quantile(np.array(raw), q, method="inverted_cdf"))
    upper_index = next(i for i, b in enumerate(bounds) if exact <= b)
    lower = 0.0 if upper_index == 0 else bounds[upper_index - 1]
    upper = bounds[upper_index] if bounds[upper_index] != float("inf") else bounds[-2]
    assert lower <= estimate <= upper, (q, exact, estimate, lower, upper)


@pytest.mark.parametrize("generation", ["new", "old"])
def test_window_quantiles_match_numpy_on_the_new_requests(generation: str) -> None:
    window = VllmWindow(60.0)
    window.add("a", snap(f"{generation}_1", 1000.0))
    window.add("a", snap(f"{generation}_2", 1015.0))
    figures = window.figures(["a"])
    second_batch = samples(generation, "2")
    bounds = snap(f"{generation}_2", 0).ttft.bounds  # type: ignore[union-attr]
    for name, q in QUANTILES.items():
        assert_within_bucket(getattr(figures, name), second_batch, q, bounds)
    # arrivals: the requests finished in the window plus the growth of what runs or waits
    first, last = snap(f"{generation}_1", 1000.0), snap(f"{generation}_2", 1015.0)
    growth = (last.running or 0) + (last.waiting or 0) - (first.running or 0) - (first.waiting or 0)
    assert figures.request_rate == pytest.approx((len(second_batch) + growth) / 15.0)
    assert figures.window_s == 15.0


def test_request_rate_is_the_arrival_rate_while_the_backlog_grows() -> None:
    """A fleet that finishes 10 req/s while 20 arrive: the rate reads 20, the load, not 10, its capacity."""
    window = VllmWindow(60.0)
    window.add("a", VllmSnapshot(read_at=0.0, waiting=0, running=100, successes=1000, prompt_tokens=0))
    window.add("a", VllmSnapshot(read_at=60.0, waiting=600, running=100, successes=1600, prompt_tokens=36_000))
    figures = window.figures(["a"])
    assert figures.request_rate == pytest.approx(20.0)
    assert figures.finish_rate == pytest.approx(10.0)  # what the fleet serves: the success counter's rate
    assert figures.prompt_tokens_rate == pytest.approx(600.0)
    assert figures.generation_tokens_rate is None  # not reported: unknown, not 0


def test_merging_two_servers_is_not_the_mean_of_their_quantiles() -> None:
    window = VllmWindow(60.0)
    window.add("new", snap("new_1", 1000.0))
    window.add("new", snap("new_2", 1010.0))
    window.add("old", snap("old_1", 1000.0))
    window.add("old", snap("old_2", 1010.0))
    figures = window.figures(["new", "old"])
    both = samples("new", "2") + samples("old", "2")
    shared = snap("old_2", 0).ttft.bounds  # type: ignore[union-attr]  # the old layout is the common one
    for name, q in QUANTILES.items():
        assert_within_bucket(getattr(figures, name), both, q, shared)
    # Averaging each server's own p99 gives a different (wrong) answer: the slow server's tail is diluted.
    per_server = []
    for generation in ("new", "old"):
        one = VllmWindow(60.0)
        one.add(generation, snap(f"{generation}_1", 1000.0))
        one.add(generation, snap(f"{generation}_2", 1010.0))
        per_server.append(one.figures([generation]).ttft_p99_s)
    assert figures.ttft_p99_s != pytest.approx(sum(per_server) / 2, rel=0.01)  # type: ignore[arg-type]


def test_a_restart_between_scrapes_counts_the_new_process_from_zero() -> None:
    window = VllmWindow(60.0)
    window.add("a", snap("new_2", 1000.0))
    window.add("a", snap("new_3_restarted", 1010.0))
    figures = window.figures(["a"])
    third = samples("new", "3")
    bounds = snap("new_3_restarted", 0).ttft.bounds  # type: ignore[union-attr]
    for name, q in QUANTILES.items():
        assert_within_bucket(getattr(figures, name), third, q, bounds)
    first, last = snap("new_2", 1000.0), snap("new_3_restarted", 1010.0)
    growth = (last.running or 0) + (last.waiting or 0) - (first.running or 0) - (first.waiting or 0)
    assert figures.request_rate == pytest.approx(max(0.0, len(third) + growth) / 10.0)
    assert figures.preemptions is not None and figures.preemptions >= 0


def test_three_scrapes_with_a_restart_in_the_middle() -> None:
    window = VllmWindow(60.0)
    for i, name in enumerate(["new_1", "new_2", "new_3_restarted"]):
        window.add("a", snap(name, 1000.0 + 10 * i))
    figures = window.figures(["a"])
    raw = samples("new", "2") + samples("new", "3")
    bounds = snap("new_2", 0).ttft.bounds  # type: ignore[union-attr]
    for name, q in QUANTILES.items():
        assert_within_bucket(getattr(figures, name), raw, q, bounds)


def test_no_request_finished_in_the_window_means_unknown_ttft() -> None:
    window = VllmWindow(60.0)
    window.add("a", snap("new_2", 1000.0))
    window.add("a", snap("new_2", 1010.0))
    figures = window.figures(["a"])
    assert figures.ttft_p50_s is None and figures.ttft_p95_s is None and figures.ttft_p99_s is None
    assert figures.request_rate == 0.0  # measured: nothing finished
    assert figures.requests_running is not None


def test_one_scrape_gives_gauges_but_no_windowed_figures() -> None:
    window = VllmWindow(60.0)
    window.add("a", snap("new_1", 1000.0))
    figures = window.figures(["a"])
    assert figures.ttft_p95_s is None and figures.request_rate is None and figures.arrivals is None
    assert figures.requests_waiting == snap("new_1", 0).waiting


def test_only_answering_endpoints_count_and_none_answering_is_unknown() -> None:
    window = VllmWindow(60.0)
    window.add("a", snap("new_1", 1000.0))
    window.add("b", snap("old_1", 1000.0))
    both = window.figures(["a", "b"])
    only_a = window.figures(["a"])
    assert both.requests_running == snap("new_1", 0).running + snap("old_1", 0).running  # type: ignore[operator]
    assert only_a.requests_running == snap("new_1", 0).running
    assert only_a.kv_cache_usage == snap("new_1", 0).kv_usage
    nobody = window.figures([])
    assert nobody.requests_running is None and nobody.kv_cache_usage is None and nobody.endpoints_answering == 0


def test_old_snapshots_leave_the_window_but_one_baseline_stays() -> None:
    window = VllmWindow(15.0)
    for t in (1000.0, 1005.0, 1010.0, 1015.0, 1020.0):
        window.add("a", snap("new_1", t))
    assert [s.read_at for s in window.history("a")] == [1005.0, 1010.0, 1015.0, 1020.0]


def test_arrivals_are_finished_plus_growth_of_the_queue() -> None:
    def s(at: float, successes: float, waiting: float, running: float) -> VllmSnapshot:
        ttft = Histogram((0.1, float("inf")), (successes, successes), 0.0)
        return VllmSnapshot(read_at=at, successes=successes, waiting=waiting, running=running, ttft=ttft)

    window = VllmWindow(60.0)
    window.add("a", s(0.0, 100, 5, 10))
    window.add("a", s(5.0, 120, 8, 12))
    assert window.figures(["a"]).arrivals == 20 + 5
    window.add("a", s(10.0, 130, 0, 2))  # queue shrank by more than finished: nobody new arrived
    assert window.figures(["a"]).arrivals == 0.0


def test_an_endpoint_with_a_missed_scrape_counts_one_intervals_arrivals_not_two() -> None:
    def s(at: float, successes: float) -> VllmSnapshot:
        ttft = Histogram((0.1, float("inf")), (successes, successes), 0.0)
        return VllmSnapshot(read_at=at, successes=successes, waiting=0, running=0, ttft=ttft)

    window = VllmWindow(60.0)
    for at, a, b in ((0.0, 0, 0), (5.0, 10, 10), (10.0, 20, None), (15.0, 30, 30)):
        window.add("a", s(at, a))
        if b is not None:
            window.add("b", s(at, b))
    # a: 10 in its last 5 s; b missed the 10 s scrape: 20 over 10 s, 10 per 5 s. 20 in one tick, not 30.
    assert window.figures(["a", "b"]).arrivals == 20
    window.add("c", s(15.0, 0))  # a new endpoint with one scrape: no count of its own yet, left out
    assert window.figures(["a", "b", "c"]).arrivals == 20


def test_prefix_cache_hit_rate_from_counters_and_from_the_old_gauge() -> None:
    window = VllmWindow(60.0)
    window.add("a", snap("new_1", 0.0))
    window.add("a", snap("new_2", 10.0))
    assert window.figures(["a"]).prefix_cache_hit_rate == pytest.approx(0.7)
    old = VllmWindow(60.0)
    old.add("b", snap("old_1", 0.0))
    assert old.figures(["b"]).prefix_cache_hit_rate == pytest.approx(0.7)
