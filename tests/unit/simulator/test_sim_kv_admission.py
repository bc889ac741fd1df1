"""The engine as vLLM runs it: requests over max_model_len refused, KV blocks admitted as held, preemption."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalectl.simulator.requests import ADMITTED, INST, Requests, empty, fresh
from scalectl.simulator.serving_pool import ServingPool
from scalectl.simulator.serving_tick import Estimates, simulate_tick
from scalectl.simulator.workloads.sources import fresh_requests
from scalectl.sizing.engine import EngineConfig, build_profile


def _profile(kv_blocks: int | None = None, max_num_seqs: int = 256, max_model_len: int = 4096):
    profile = build_profile(
        "H100-SXM5-80GB", "llama-3.1-8b", EngineConfig(max_num_seqs=max_num_seqs, max_model_len=max_model_len)
    )
    if kv_blocks is not None:
        profile = dataclasses.replace(profile, kv_capacity_tokens=kv_blocks * 16)
    return profile


def _three_at_once(kv_blocks: int):
    """Three requests at t=0 of 30 prompt tokens (31 with the first token: 2 blocks) and 34 output tokens
    (64 in all: 4 blocks at the end), on one instance, over one long tick."""
    profile = _profile(kv_blocks)
    req = fresh(np.zeros(3), np.full(3, 30.0), np.full(3, 34.0), np.zeros(3), np.zeros(3))
    req.data[:, INST] = 0
    est = Estimates(np.zeros(1), np.zeros(1), np.zeros(1))
    return simulate_tick(profile, est, np.full(1, -1.0), empty(), req, 0.0, 10.0)


@pytest.mark.parametrize(
    ("kv_blocks", "preempted"),
    [
        # 12 blocks hold all three at their final 4 blocks: nothing is preempted.
        (12, 0),
        # 8 blocks: all three admitted (6 blocks); #1 and #2 take the 2 free blocks as they pass 32 tokens,
        # #3 finds none and, the newest, is preempted (its 2 blocks freed); #1 and #2 then take those two
        # as they pass 48 tokens and finish with 4 blocks each; #3 is recomputed alone afterwards.
        (8, 1),
        # 7 blocks: 1 free. #1 takes it at 32 tokens; #2 finds none: #3 (the newest) is preempted, freeing
        # 2; #2 takes one; #1 takes the other at 48 tokens; #2 finds none at 48: now itself the newest, it is
        # preempted. #1 finishes alone, then #2 and #3 are recomputed (4 + 3 blocks at most: they fit).
        (7, 2),
    ],
)
def test_kv_blocks_are_taken_as_sequences_grow_and_the_newest_is_preempted(kv_blocks: int, preempted: int) -> None:
    result = _three_at_once(kv_blocks)
    assert result.preempted == preempted
    assert len(result.done) == 3  # every one finishes within the tick, preempted or not
    assert len(result.ttft) == 3  # a first token each, counted once though two are recomputed


def test_all_start_together_and_the_preempted_finish_after_the_ones_that_kept_their_blocks() -> None:
    free = _three_at_once(12)
    tight = _three_at_once(7)
    # With room for all, the three run side by side; with 7 blocks #1 ends as before, the two preempted
    # ones only after it, once they have recomputed what they had.
    assert np.ptp(free.done_end) < 0.005
    # All three start at once (2 blocks each fit), where reserving their final 4 blocks would admit one.
    assert np.max(tight.ttft) <= np.max(free.ttft) + 1e-9
    ends = np.sort(tight.done_end)
    assert ends[0] <= np.max(free.done_end)
    assert ends[1] > np.max(free.done_end) + 0.02


def test_admission_counts_blocks_held_not_max_model_len() -> None:
    # 7 sequences of max_model_len 131,072 would fill this cache, yet short requests run 100 at once.
    profile = _profile(max_model_len=131072)
    assert profile.slots_at_max_len < 10
    req = fresh(np.zeros(100), np.full(100, 600.0), np.full(100, 350.0), np.zeros(100), np.zeros(100))
    req.data[:, INST] = 0
    est = Estimates(np.zeros(1), np.zeros(1), np.zeros(1))
    result = simulate_tick(profile, est, np.full(1, -1.0), empty(), req, 0.0, 1.0)
    assert result.preempted == 0
    assert result.inflight.data[:, ADMITTED].sum() + len(result.done) == 100  # all admitted at once


def test_a_prompt_over_max_model_len_is_refused_and_counted_as_a_miss() -> None:
    pool = ServingPool(_profile(max_model_len=4096))
    pool.set_instances(["a"])
    n = 50
    n_in = np.where(np.arange(n) % 5 == 0, 6000.0, 600.0)  # 20% of prompts are 6,000 tokens
    pool.advance(0.0, 10.0, _Once(fresh_requests(np.linspace(0.0, 1.0, n), n_in, np.full(n, 100.0))))
    rec = pool.record
    assert rec.rejected_too_long == 10
    ttft = np.concatenate(rec.ttft)
    assert np.isinf(ttft).sum() == 10  # judged, never a first token
    assert np.isfinite(ttft).sum() == 40


def test_prompt_plus_output_over_max_model_len_is_refused_too() -> None:
    pool = ServingPool(_profile(max_model_len=4096))
    pool.set_instances(["a"])
    sent = fresh_requests(np.array([0.0, 0.1, 0.2]), np.array([4000.0, 4000.0, 4096.0]), np.array([96.0, 97.0, 1.0]))
    pool.advance(0.0, 5.0, _Once(sent))
    assert pool.record.rejected_too_long == 2  # 4,000 + 97 and 4,096 + 1; 4,000 + 96 fits exactly


class _Once:
    """An open-loop source that sends ``requests`` in the first tick."""

    def __init__(self, requests: Requests) -> None:
        self._requests: Requests | None = requests

    def arrivals(self, t0: float, t1: float) -> Requests:
        out, self._requests = self._requests, None
        return out if out is not None else empty()


@pytest.mark.parametrize(("prompt", "share"), [(600, 0.0), (6000, 1.0)])
def test_the_workload_share_over_max_model_len_is_warned_before_the_run(prompt: float, share: float) -> None:
    from scalectl.simulator.context_limit import share_over
    from scalectl.simulator.workloads.spec import PoissonLoad

    load = PoissonLoad.model_validate({"kind": "poisson", "rate": 1.0, "input_tokens": prompt, "output_tokens": 100})
    assert share_over(load, None, 4096) == share  # type: ignore[arg-type]  # synthetic loads need no workload


def test_a_lognormal_prompt_share_over_the_limit_is_estimated() -> None:
    from scalectl.simulator.context_limit import share_over
    from scalectl.simulator.workloads.spec import PoissonLoad

    # Lognormal, mean 3,000, cv 0.5: P(prompt + 96 > 4,096) = P(prompt > 4,000) ≈ 0.20 (by the lognormal CDF).
    load = PoissonLoad.model_validate(
        {"kind": "poisson", "rate": 1.0, "input_tokens": {"mean": 3000, "cv": 0.5}, "output_tokens": 96}
    )
    sigma = np.sqrt(np.log1p(0.25))
    mu = np.log(3000) - sigma**2 / 2
    from math import erf, log, sqrt

    want = 0.5 * (1 - erf((log(4000.5) - mu) / (sigma * sqrt(2))))
    assert share_over(load, None, 4096) == pytest.approx(want, abs=0.005)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kv_blocks", "max_num_seqs"), [(None, 8), (300, 64)])
def test_a_backlog_by_columns_or_a_queue_by_chunks_is_served_exactly_the_same(
    monkeypatch: pytest.MonkeyPatch, kv_blocks: int | None, max_num_seqs: int
) -> None:
    """A tick past ``COLUMNS_FROM`` rows copies its matrix by columns, and an instance at its limit lists its
    queue ``QUEUE_CHUNK`` at a time, both for speed: the figures must not move."""
    import scalectl.simulator.serving_tick as serving_tick

    def served(columns_from: int, chunk: int = 1024) -> tuple[list[np.ndarray], int]:
        monkeypatch.setattr(serving_tick, "COLUMNS_FROM", columns_from)
        monkeypatch.setattr(serving_tick, "QUEUE_CHUNK", chunk)
        pool = ServingPool(_profile(kv_blocks, max_num_seqs=max_num_seqs))
        pool.set_instances(["a", "b", "c"])
        rng = np.random.default_rng(7)

        class Flood:  # far more than three instances admit: a backlog builds over the ticks
            def arrivals(self, t0: float, t1: float) -> Requests:
                k = int(rng.poisson(200.0 * (t1 - t0)))
                t = np.sort(rng.uniform(t0, t1, k))
                return fresh_requests(
                    t, rng.integers(50, 1500, k).astype(float), rng.integers(20, 400, k).astype(float)
                )

        source = Flood()
        for k in range(12):
            pool.advance(5.0 * k, 5.0 * (k + 1), source)
        return [*pool.record.ttft, *pool.record.e2e, pool._inflight.data], pool.record.preemptions

    by_rows, preempted = served(10**9, chunk=10**9)
    for other, preempted_too in (served(0), served(10**9, chunk=3)):
        assert preempted == preempted_too
        assert len(by_rows) == len(other)
        for a, b in zip(by_rows, other, strict=True):
            assert np.array_equal(a, b, equal_nan=True)
    assert by_rows[-1].shape[0] > 500  # a backlog was carried
