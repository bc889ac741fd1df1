"""The vectorised tick against a plain request-by-request reference, and the admission limits."""

from __future__ import annotations

import numpy as np

from scalectl.simulator.fleet import engine_for
from scalectl.simulator.requests import FIRST, INST, Requests, T, fresh
from scalectl.simulator.serving_pool import ServingPool, least_connections
from scalectl.simulator.serving_tick import Estimates, _by_instance_then_arrival, _over_limit, lane_for, simulate_tick
from scalectl.simulator.workloads.sources import fresh_requests
from scalectl.sizing.engine import EngineConfig, build_profile
from scalectl.tiers.config import parse_config


def _estimates(n: int, batch: float) -> Estimates:
    return Estimates(np.full(n, batch), np.full(n, batch * 800.0), np.zeros(n))


def test_prefill_lane_matches_a_sequential_lindley_recursion() -> None:
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    rng = np.random.default_rng(4)
    n, slots = 400, 3
    t = np.sort(rng.uniform(0, 5, n))
    n_in = rng.integers(100, 3000, n)
    req = fresh(t, n_in, rng.integers(1, 300, n), rng.random(n), np.zeros(n))
    req.data[:, INST] = rng.integers(0, slots, n)
    est = _estimates(slots, 40.0)
    free_from = np.array([-1.0, 0.3, -1.0])
    result = simulate_tick(profile, est, free_from, Requests(np.empty((0, req.data.shape[1]))), req, 0.0, 5.0)

    lane, _ = lane_for(profile, est)
    first_token = {}
    for slot in range(slots):
        free_at = free_from[slot]
        for i in np.flatnonzero(req.data[:, INST] == slot):
            st, ch = lane.step[slot], lane.chunk[slot]
            p = float(n_in[i])
            service = p * (st + lane.full_extra[slot]) / ch
            depart = max(t[i] + req.data[i, 7] * st, free_at) + service
            free_at = depart
            extra = float(
                profile.prefill_extra_s(np.array([p]), lane.free[slot : slot + 1], lane.chunk[slot : slot + 1])[0]
            )
            first_token[i] = depart + max(st + extra - service, 0.0)
    # Every request admitted on arrival (no limit binds), first tokens exactly as the recursion says.
    rows = np.concatenate([result.inflight.data, result.done.data])
    rows = rows[np.argsort(rows[:, 1])]  # by origin = arrival order
    assert rows.shape[0] == n
    want = np.array([first_token[i] for i in range(n)])
    bad = np.flatnonzero(~np.isclose(rows[:, FIRST], want, rtol=0, atol=1e-7))
    assert not bad.shape[0], (bad[:5], rows[bad[:5], FIRST], want[bad[:5]], rows[bad[:5], INST])


def test_max_num_seqs_holds_and_admission_is_first_come_first_served() -> None:
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b", EngineConfig(max_num_seqs=16))
    pool = ServingPool(profile)
    pool.set_instances(["a"])
    burst = fresh_requests(np.linspace(0.0, 0.5, 80), np.full(80, 500.0), np.full(80, 400.0))

    class Once:
        def __init__(self) -> None:
            self.sent = False

        def arrivals(self, t0: float, t1: float) -> Requests:
            if self.sent:
                return Requests(np.empty((0, burst.data.shape[1])))
            self.sent = True
            return burst

    source = Once()
    t = 0.0
    firsts: list[np.ndarray] = []
    while t < 120:
        pool.advance(t, t + 5.0, source)
        t += 5.0
        signals = pool.signals()
        assert signals.requests_running is not None and signals.requests_running <= 16
        firsts.append(pool.record.ttft_at[-1])
    assert pool.record.timeline[0][3] == 16  # running: exactly the limit
    assert pool.record.timeline[0][4] > 0  # the rest wait for a slot
    first_tokens = np.concatenate(firsts)
    assert first_tokens.shape[0] == 80
    ttft = np.concatenate(pool.record.ttft)
    # FCFS: identical requests get their first tokens in arrival order; the last ones waited for slots.
    origin = first_tokens - ttft
    assert np.all(np.diff(first_tokens[np.argsort(origin)]) >= -1e-9)
    assert ttft.max() > 5 * ttft.min()
    assert np.concatenate(pool.record.e2e).shape[0] == 80


def test_least_connections_levels_load_and_spreads_each_share_over_the_tick() -> None:
    assignment = least_connections(np.array([10, 0, 4]), 12)
    assert np.bincount(assignment, minlength=3).tolist() == [0, 8, 4]  # the emptiest take the most
    assert assignment.tolist() == [1, 2, 1, 1, 2, 1, 1, 2, 1, 1, 2, 1]  # interleaved, not 1 × 8 then 2 × 4
    assert least_connections(np.array([5, 5, 5]), 7).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert least_connections(np.array([3]), 5).tolist() == [0] * 5


def test_least_connections_hands_out_what_sorting_every_connection_slot_would() -> None:
    """Against the plain formulation: every instance's next connection slots sorted by the connections
    they would make, the first n taken; then each instance's share spread over the tick."""
    rng = np.random.default_rng(3)
    for _ in range(2000):
        k, n = int(rng.integers(2, 40)), int(rng.integers(1, 3000))
        loads = rng.integers(0, int(rng.choice([3, 50, 400])), k)
        loads[rng.random(k) < 0.2] += int(rng.integers(0, 2000))  # a few far busier
        level = int(np.ceil((loads.sum() + n) / k)) + 1
        extra = np.maximum(level - loads, 0)
        inst = np.repeat(np.arange(k), extra)
        rank = np.arange(inst.shape[0]) - (np.cumsum(extra) - extra)[inst]
        take = np.bincount(inst[np.lexsort((inst, loads[inst] + rank))[:n]], minlength=k)
        mine = np.repeat(np.arange(k), take)
        position = (np.arange(n) - (np.cumsum(take) - take)[mine] + 0.5) / take[mine]
        expected = mine[np.lexsort((mine, position))]
        assert least_connections(loads.astype(np.float64), n).tolist() == expected.tolist()


def test_a_fleet_serves_its_share_of_the_load_as_well_as_one_instance_does() -> None:
    """Fourteen instances behind the balancer at the rate one instance holds meet the TTFT target at least as
    often as that one instance: routing must not make bursts (handing each tick's arrivals out in arrival
    order sent dozens in a row to one instance, and the fleet met 90% where one instance met 99.6%)."""
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    rate, target = 30.0, 0.5  # near what one instance holds: where bursts would show

    def share_met(instances: int) -> float:
        rng = np.random.default_rng(7)
        pool = ServingPool(profile)
        pool.set_instances([f"i{k}" for k in range(instances)])

        class Poisson:
            def arrivals(self, t0: float, t1: float) -> Requests:
                n = rng.poisson(rate * instances * (t1 - t0))
                t = np.sort(rng.uniform(t0, t1, n))
                return fresh(t, rng.integers(500, 2500, n), rng.integers(50, 450, n), rng.random(n), np.zeros(n))

        source, t = Poisson(), 0.0
        while t < 300.0:
            pool.advance(t, t + 5.0, source)
            t += 5.0
        ttft = np.concatenate(pool.record.ttft[12:])  # after the first minute
        return float((ttft <= target).mean())

    one, fleet = share_met(1), share_met(14)
    assert one > 0.99  # the rate is within one instance's reach
    assert fleet >= one - 0.005, (one, fleet)


def test_a_restored_checkpoint_replays_the_same_stretch() -> None:
    """The measured oracle runs each minute again from one state: a restored pool must give the same
    answers and leave its record as if the first run had not happened."""
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    rng = np.random.default_rng(3)
    n = 3000
    t = np.sort(rng.uniform(0.0, 120.0, n))
    requests = fresh(t, rng.integers(500, 2500, n), rng.integers(50, 450, n), rng.random(n), np.zeros(n))

    class Fixed:
        def arrivals(self, t0: float, t1: float) -> Requests:
            return requests.take((t >= t0) & (t < t1))

    pool = ServingPool(profile)
    pool.set_instances(["a", "b"])
    source = Fixed()
    for k in range(12):
        pool.advance(5.0 * k, 5.0 * (k + 1), source)
    saved, recorded = pool.checkpoint(), len(pool.record.ttft)

    def second_minute(ready: list[str]) -> tuple[list[np.ndarray], object]:
        pool.restore(saved)
        pool.set_instances(ready)
        for k in range(12, 24):
            pool.advance(5.0 * k, 5.0 * (k + 1), source)
        return pool.record.ttft[recorded:], pool.signals()

    first, seen_first = second_minute(["a", "b"])
    other, _ = second_minute(["a", "b", "c"])  # a different fleet in between
    again, seen_again = second_minute(["a", "b"])
    rec = pool.record
    assert {len(rec.ttft_at), len(rec.ttft), len(rec.ttft_origin), len(rec.e2e), len(rec.timeline)} == {recorded + 12}
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))
    assert seen_again == seen_first  # the TTFT window and rates too
    assert not all(np.array_equal(x, y) for x, y in zip(first, other, strict=True))


def test_over_limit_finds_the_instances_one_at_a_time_would() -> None:
    """All instances at once, against each instance's own sweep over its starts and finishes (with the bound
    that clears most instances before the sort: ends before starts, infinite ends, ties)."""
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(200):
        n, slots = int(rng.integers(1, 2000)), int(rng.integers(1, 16))
        req = fresh(100.0 + rng.uniform(-3, 5, n).round(1), np.ones(n), np.ones(n), np.zeros(n), np.zeros(n))
        d = req.data
        inst = rng.integers(0, slots, n)
        reserve = rng.integers(100, int(rng.choice([3_000, 30_000, 300_000])), n).astype(np.float64)
        end = rng.uniform(0, 8, n).round(1)  # ties between starts and finishes
        end[rng.random(n) < 0.05] = np.inf
        candidates = rng.random(n) < 0.6
        maybe = (rng.random(slots) < 0.7) & (np.bincount(inst, minlength=slots) > 0)
        expected = []
        for slot in np.flatnonzero(maybe).tolist():
            on = np.flatnonzero(inst == slot)
            start = np.where(candidates[on], np.maximum(d[on, T] - 100.0, 0.0), -1.0)
            times = np.concatenate([start, end[on]])
            delta = np.concatenate([np.ones(on.shape[0]), -np.ones(on.shape[0])])
            weight = np.concatenate([reserve[on], -reserve[on]])
            order = np.lexsort((delta, times))
            if (np.cumsum(delta[order]).max() > profile.max_num_seqs
                    or np.cumsum(weight[order]).max() > profile.kv_capacity_tokens):  # fmt: skip
                expected.append(slot)
        span = float(rng.choice([0.5, 5.0, 50.0]))  # where the bound's windows fall: any span finds the same
        assert _over_limit(profile, d, inst, maybe, candidates, 100.0, span, end, reserve) == expected
        found += len(expected)
    assert found > 100  # the limits were reached often enough to mean something


def test_requests_order_by_instance_then_arrival_as_lexsort_would() -> None:
    rng = np.random.default_rng(5)
    for slots in (3, 40, 70_000):  # the last past what a radix pass on 16 bits holds
        inst = rng.integers(0, slots, 3000)
        arrive = np.maximum(rng.uniform(-1, 5, 3000).round(2), 0.0)  # ties, and zeros for the carried
        assert np.array_equal(_by_instance_then_arrival(inst, arrive), np.lexsort((arrive, inst)))


def test_a_fleet_at_its_admission_limit_serves_what_its_instances_serve_alone() -> None:
    """Running a tick again on the tick's own figures is per instance: replacing every instance's whenever one
    moved slowed a saturated fleet to about half of what its instances serve one by one."""
    tiers = (
        "tiers:\n  api: {capacity: on-demand, gpu: A100-80GB-PCIe, providers: [simulated], min: 1, max: 8,\n"
        "        policy: {kind: min-floor}}\n"
    )
    profile = engine_for(parse_config(tiers, "tiers.yaml").tiers["api"])  # what the daemon launches there

    def served(n: int) -> float:
        pool = ServingPool(profile)
        pool.set_instances([f"i{k}" for k in range(n)])
        rng = np.random.default_rng(n)

        class Near:  # close to the limit: 20 req/s each of 413/134-token requests
            def arrivals(self, t0: float, t1: float) -> Requests:
                k = int(rng.poisson(20.0 * n * (t1 - t0)))
                t = np.sort(rng.uniform(t0, t1, k))
                return fresh_requests(
                    t, np.clip(rng.lognormal(5.67, 0.84, k), 1, 1652), np.clip(rng.lognormal(4.69, 0.65, k), 1, None)
                )

        source, t, counted = Near(), 0.0, 0
        while t < 240.0:
            before = sum(len(chunk) for chunk in pool.record.ttft)
            pool.advance(t, t + 5.0, source)
            t += 5.0
            if t > 60.0:
                counted += sum(len(chunk) for chunk in pool.record.ttft) - before
        return counted / 180.0 / n

    alone, fleet = served(1), served(6)
    assert fleet >= 0.9 * alone, (alone, fleet)
