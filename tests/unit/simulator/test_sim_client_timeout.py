"""Clients that give up: an open-loop request with no first token ``client_timeout`` after it was sent leaves
the queue (nginx cut it; vLLM aborted it) and counts as a miss. At zero the activator's bounds apply too:
at most ``max_held`` held, each at most ``max_wait``."""

from __future__ import annotations

import numpy as np
import pytest

from scalectl.simulator.requests import ADMITTED, ORIGIN, TTFT_DONE, Requests, empty
from scalectl.simulator.serving_pool import HoldBounds, ServingPool
from scalectl.simulator.workloads.sources import fresh_requests
from scalectl.simulator.workloads.spec import WorkloadError, parse_workload
from scalectl.sizing.engine import EngineConfig, build_profile

TICK = 5.0


class Steady:
    """``rate`` requests per second of long prompts: far more than one instance serves."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def arrivals(self, t0: float, t1: float) -> Requests:
        n = int(self.rate * (t1 - t0))
        t = np.linspace(t0, t1, n, endpoint=False)
        return fresh_requests(t, np.full(n, 3000.0), np.full(n, 200.0))


def _overloaded(timeout: float | None, seconds: float) -> ServingPool:
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b", EngineConfig(max_num_seqs=16))
    pool = ServingPool(profile, client_timeout=timeout)
    pool.set_instances(["a"])
    source = Steady(200.0)
    t = 0.0
    while t < seconds:
        pool.advance(t, t + TICK, source)
        t += TICK
    return pool


def _judged(pool: ServingPool) -> np.ndarray:
    return np.concatenate(pool.record.ttft)


def test_requests_waiting_past_the_timeout_leave_the_queue_as_misses() -> None:
    timeout = 60.0
    pool = _overloaded(timeout, 300.0)
    rec = pool.record
    assert rec.abandoned > 0
    waiting = pool._inflight.data
    queued = waiting[(waiting[:, ADMITTED] == 0) & (waiting[:, TTFT_DONE] == 0)]
    # What is left waiting was sent within the timeout (and one tick, the granularity of the check).
    assert (300.0 - queued[:, ORIGIN] <= timeout + TICK).all()
    ttft = _judged(pool)
    assert (ttft >= timeout).sum() >= rec.abandoned  # each one judged, and over any TTFT target
    # Every request is judged once: first token delivered, cut, or still waiting for it.
    assert ttft.shape[0] + int((waiting[:, TTFT_DONE] == 0).sum()) == rec.arrivals


def test_requests_already_admitted_are_not_cut() -> None:
    pool = _overloaded(10.0, 120.0)
    d = pool._inflight.data
    admitted = d[d[:, ADMITTED] > 0]
    assert admitted.shape[0] > 0  # the engine is full of them
    assert pool.record.abandoned > 0


def test_without_a_timeout_the_backlog_waits_for_ever() -> None:
    cut = _overloaded(60.0, 300.0)
    kept = _overloaded(None, 300.0)
    assert kept.record.abandoned == 0
    assert len(kept._inflight) > len(cut._inflight)
    # With clients that give up, no one waits past the timeout (and a tick); without, the wait only grows.
    assert _judged(cut).max() <= 60.0 + TICK < _judged(kept).max()


def test_a_checkpoint_restores_the_count_of_timed_out_requests() -> None:
    pool = _overloaded(30.0, 120.0)
    before = pool.record.abandoned
    cp = pool.checkpoint()
    source = Steady(200.0)
    for t in (120.0, 125.0, 130.0):
        pool.advance(t, t + TICK, source)
    assert pool.record.abandoned > before
    pool.restore(cp)
    assert pool.record.abandoned == before


def test_held_requests_at_zero_time_out_too() -> None:
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    pool = ServingPool(profile, client_timeout=20.0)
    source = Steady(2.0)
    for k in range(10):  # no instance: everything is held at the balancer
        pool.advance(k * TICK, (k + 1) * TICK, source)
    assert pool.record.abandoned > 0
    assert (50.0 - pool._unrouted.data[:, ORIGIN] <= 20.0 + TICK).all()
    assert len(pool._inflight) == len(empty())


def _workload(extra: str) -> str:
    return f"duration: 1h\ntiers:\n  api:\n    kind: poisson\n    rate: 10\n{extra}"


def test_client_timeout_defaults_to_the_routes_read_timeout_and_accepts_null() -> None:
    assert parse_workload(_workload("")).tiers["api"].client_timeout == 600.0
    assert parse_workload(_workload("    client_timeout: 2m\n")).tiers["api"].client_timeout == 120.0
    assert parse_workload(_workload("    client_timeout: null\n")).tiers["api"].client_timeout is None


def test_a_client_timeout_of_zero_is_refused_naming_the_field() -> None:
    with pytest.raises(WorkloadError, match="client_timeout"):
        parse_workload(_workload("    client_timeout: 0s\n"))


def test_sessions_have_no_client_timeout() -> None:
    text = "duration: 1h\ntiers:\n  chat:\n    kind: sessions\n    sessions: 10\n    client_timeout: 60s\n"
    with pytest.raises(WorkloadError, match="client_timeout"):
        parse_workload(text)


def _at_zero(hold: HoldBounds, client_timeout: float | None, ticks: int) -> ServingPool:
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    pool = ServingPool(profile, client_timeout=client_timeout, hold=hold)
    source = Steady(2.0)  # 10 a tick
    for k in range(ticks):
        pool.advance(k * TICK, (k + 1) * TICK, source)
    return pool


def test_at_zero_the_activator_holds_the_first_max_held_and_refuses_the_rest() -> None:
    pool = _at_zero(HoldBounds(max_held=25, max_wait=300.0), None, 4)  # 40 arrive, none ready
    assert len(pool._unrouted) == 25
    assert pool.record.refused == 15
    held = pool._unrouted.data[:, ORIGIN]
    refused_sent = np.concatenate(pool.record.ttft_origin)
    assert held.max() < refused_sent.min()  # the first to come are held
    assert np.isinf(np.concatenate(pool.record.ttft)).all()  # never a first token: a miss at any target


def test_at_zero_a_held_request_gets_503_at_max_wait_if_sooner_than_the_clients_timeout() -> None:
    pool = _at_zero(HoldBounds(max_held=1000, max_wait=15.0), 600.0, 10)
    assert pool.record.abandoned > 0 and pool.record.refused == 0
    assert (50.0 - pool._unrouted.data[:, ORIGIN] <= 15.0 + TICK).all()
    later = _at_zero(HoldBounds(max_held=1000, max_wait=300.0), 20.0, 10)  # the client gives up first
    assert (50.0 - later._unrouted.data[:, ORIGIN] <= 20.0 + TICK).all()
