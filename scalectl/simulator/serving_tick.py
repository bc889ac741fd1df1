"""One tick of a serving tier's instances, for all requests at once (pure: state in, state out).

Within a tick each instance runs at a constant decode step time, set by its batch size and KV cache
(estimated from the previous pass). Prompts go through a FIFO "prefill lane" per instance; its exact
departure times come from the Lindley recursion D_i = max(S_i, D_{i-1}) + s_i, solved for every request
of every instance at once with a cumulative sum and a segmented running maximum. Admission limits
(``max_num_seqs``, KV capacity) are checked per instance: when they cannot bind during the tick (the usual
case) everything is vectorised; an instance at its limit is stepped request by request (FCFS, as vLLM does).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from scalectl.simulator.requests import (
    ADMITTED,
    FIRST,
    INST,
    N_CACHED,
    N_IN,
    N_OUT,
    ORIGIN,
    OVERHEAD,
    REMAINING,
    ROUND,
    TTFT_DONE,
    BoolArray,
    FloatArray,
    IntArray,
    Requests,
    U,
)
from scalectl.simulator.requests import T as COL_T
from scalectl.sizing.engine import EngineProfile


@dataclass(frozen=True, slots=True)
class Estimates:
    """Per instance slot: what the engine looks like during the tick (drives step time and rates)."""

    batch: FloatArray  # sequences decoding
    kv_tokens: FloatArray  # KV cache tokens held by them
    prefill_busy: FloatArray  # share of the time by which prompt work stretches engine steps


@dataclass(frozen=True, slots=True)
class Lane:
    """Per instance slot, for the tick: decode step time, chunk size, free compute, full-chunk stretch."""

    step: FloatArray
    chunk: FloatArray
    free: FloatArray
    full_extra: FloatArray
    busiest: FloatArray  # largest share of time prompts can stretch steps (every step a full chunk)


@dataclass(frozen=True, slots=True)
class TickResult:
    inflight: Requests  # state at t1 (ROUND reset to -1)
    prefill_free: FloatArray  # per slot: when its prefill lane frees (absolute seconds)
    during: Estimates  # time averages over the tick
    at_end: Estimates  # state at t1 (the next tick's starting estimate)
    ttft_at: FloatArray  # first-token times in (t0, t1]
    ttft: FloatArray  # their client-side TTFT
    ttft_origin: FloatArray  # when their clients sent them
    done: Requests  # requests completed in (t0, t1]
    done_end: FloatArray  # client-side completion time
    done_e2e: FloatArray  # client-side end-to-end latency


def lane_for(profile: EngineProfile, est: Estimates) -> tuple[Lane, FloatArray]:
    """The tick's per-instance engine figures and decode rate (tokens/s per running sequence)."""
    step = profile.decode_step_s(est.batch, est.kv_tokens)
    chunk = profile.chunk_tokens(est.batch)
    free = profile.free_compute_s(est.batch, est.kv_tokens)
    full_extra = profile.prefill_extra_s(chunk, free, chunk)  # a step carrying a full chunk
    busiest = full_extra / (step + full_extra)
    rate = profile.decode_tokens_per_s(step, np.minimum(est.prefill_busy, busiest))
    return Lane(step, chunk, free, full_extra, busiest), rate


def simulate_tick(
    profile: EngineProfile,
    est: Estimates,
    prefill_free: FloatArray,
    carried: Requests,
    new: Requests,
    t0: float,
    t1: float,
    lane_rate: tuple[Lane, FloatArray] | None = None,
) -> TickResult:
    """Advance ``carried`` (inside the instances at t0) and ``new`` (routed arrivals) to ``t1``.

    ``lane_rate``: ``lane_for(profile, est)`` when the caller has it already."""
    span = t1 - t0
    n_slots = est.batch.shape[0]
    lane, rate = lane_rate if lane_rate is not None else lane_for(profile, est)
    rel_free = prefill_free - t0  # times relative to t0 inside the scan (keeps float error tiny)

    d = Requests.concat([carried, new]).data
    inst = d[:, INST].astype(np.int64)
    first = d[:, FIRST].copy()
    admitted = d[:, ADMITTED] > 0
    remaining = d[:, REMAINING]
    served = np.zeros(d.shape[0])  # step stretching caused by prompts admitted this tick
    end = np.maximum(first - t0, 0.0) + remaining / rate[inst]  # NaN for the not yet admitted

    candidates = ~admitted
    if candidates.any():
        prompt = np.maximum(d[:, N_IN] - d[:, N_CACHED], 1.0)
        reserve = d[:, N_IN] + d[:, N_OUT]
        count = np.bincount(inst, minlength=n_slots)
        tokens = np.bincount(inst, weights=reserve, minlength=n_slots)
        maybe = (count > profile.max_num_seqs) | (tokens > profile.kv_capacity_tokens)
        saved_free = rel_free.copy()
        cand = np.flatnonzero(candidates)
        _scan_fast(profile, cand, d, inst, t0, lane, prompt, rate, rel_free, first, end, served)
        admitted[cand] = True
        if maybe.any():
            # Admitting everyone on arrival is right unless the limits were actually reached: check the peak.
            for slot in _over_limit(profile, d, inst, maybe, candidates, t0, end, reserve):
                redo = candidates & (inst == slot)
                first[redo], end[redo], served[redo], admitted[redo] = np.nan, np.inf, 0.0, False
                rel_free[slot] = saved_free[slot]
                _step_limited(profile, slot, d, inst, candidates, reserve, t0, span, lane, prompt, rate, rel_free,
                              first, end, admitted, served)  # fmt: skip
    end[~admitted] = np.inf

    first_rel = first - t0
    first_seen = admitted & (first_rel <= span)
    fresh_first = first_seen & (d[:, TTFT_DONE] == 0)
    done = end <= span
    keep = ~done
    overlap = np.minimum(end, span) - np.maximum(first_rel, 0.0)
    overlap[~first_seen | (overlap < 0)] = 0.0
    decoding_end = keep & first_seen
    left = np.where(decoding_end, np.maximum(remaining - overlap * rate[inst], 0.0), remaining)
    busy = np.minimum(np.bincount(inst, weights=served, minlength=n_slots) / span, lane.busiest)
    during = Estimates(
        batch=np.bincount(inst, weights=overlap, minlength=n_slots) / span,
        kv_tokens=np.bincount(inst, weights=overlap * (d[:, N_IN] + 0.5 * d[:, N_OUT]), minlength=n_slots) / span,
        prefill_busy=busy,
    )
    ends_at = inst[decoding_end]
    context = (d[:, N_IN] + d[:, N_OUT] - left)[decoding_end]
    at_end = Estimates(
        batch=np.bincount(ends_at, minlength=n_slots).astype(np.float64),
        kv_tokens=np.bincount(ends_at, weights=context, minlength=n_slots).astype(np.float64),
        prefill_busy=busy,
    )
    kept = np.flatnonzero(keep)
    state = d.take(kept, axis=0)  # rows by index: take is four times faster than d[kept]
    state[:, ADMITTED] = admitted[kept]
    state[:, FIRST] = first[kept]
    state[:, REMAINING] = left[kept]
    state[:, TTFT_DONE] = np.maximum(state[:, TTFT_DONE], first_seen[kept])
    state[:, ROUND] = -1.0
    done_rows = np.compress(done, d, axis=0)
    done_rows[:, FIRST] = first[done]
    done_rows[:, REMAINING] = 0.0
    done_end = end[done] + t0 + done_rows[:, OVERHEAD]
    return TickResult(
        inflight=Requests(state),
        prefill_free=rel_free + t0,
        during=during,
        at_end=at_end,
        ttft_at=first[fresh_first],
        ttft=first[fresh_first] - d[:, ORIGIN][fresh_first] + d[:, OVERHEAD][fresh_first],
        ttft_origin=d[:, ORIGIN][fresh_first],
        done=Requests(done_rows),
        done_end=done_end,
        done_e2e=done_end - done_rows[:, ORIGIN],
    )


def _over_limit(
    profile: EngineProfile,
    d: FloatArray,
    inst: IntArray,
    maybe: BoolArray,
    candidates: BoolArray,
    t0: float,
    end: FloatArray,
    reserve: FloatArray,
) -> list[int]:
    """Instances among ``maybe`` whose sequences or reserved KV tokens would exceed the limits at some moment.

    All of them at once: each request holds a sequence and its tokens from its start (or the tick's, when
    it was admitted before) to its end; sorted by instance, time and finishes first, the running sums per
    instance peak where its load does. (One instance at a time cost a tenth of the fleet model.)"""
    on = np.flatnonzero(maybe[inst])
    n = on.shape[0]
    if not n:
        return []
    start = np.where(candidates[on], np.maximum(d[:, COL_T][on] - t0, 0.0), -1.0)
    # Finishes first, then starts: at equal times a finish frees its slot before a start takes one, so a
    # stable sort by instance then time is the order (``_by_instance_then_arrival``).
    times = np.concatenate([end[on], start])
    delta = np.concatenate([-np.ones(n), np.ones(n)])
    weight = np.concatenate([-reserve[on], reserve[on]])
    slots = np.concatenate([inst[on], inst[on]])
    order = _by_instance_then_arrival(slots, times)
    slots = slots[order]
    first = np.flatnonzero(np.concatenate([[True], slots[1:] != slots[:-1]]))
    over = (_peak_running_sum(delta[order], first) > profile.max_num_seqs) | (
        _peak_running_sum(weight[order], first) > profile.kv_capacity_tokens
    )
    return [int(slot) for slot in slots[first[over]]]


def _peak_running_sum(values: FloatArray, first: IntArray) -> FloatArray:
    """Per segment (``first``: where each starts), the largest running sum from the segment's start. Exact:
    the values are whole numbers (sequences, token counts), so no sum rounds."""
    total = np.cumsum(values)
    before = total[first] - values[first]  # the running sum when each segment starts
    return np.maximum.reduceat(total, first) - before


def _scan_fast(
    profile: EngineProfile,
    index: IntArray,
    d: FloatArray,
    all_inst: IntArray,
    t0: float,
    lane: Lane,
    prompt: FloatArray,
    rate: FloatArray,
    rel_free: FloatArray,
    first: FloatArray,
    end: FloatArray,
    served: FloatArray,
) -> None:
    """Admit ``index`` at arrival and run the prefill-lane recursion for all instances at once (in place)."""
    inst = all_inst[index]
    arrive = np.maximum(d[:, COL_T][index] - t0, 0.0)  # a column, then its rows: half the time of d[index, c]
    if inst.shape[0] > 1 and (inst[1:] != inst[0]).any():
        order = _by_instance_then_arrival(inst, arrive)
        index, inst, arrive = index[order], inst[order], arrive[order]
    elif inst.shape[0] > 1 and (arrive[1:] < arrive[:-1]).any():
        order = np.argsort(arrive, kind="stable")
        index, arrive = index[order], arrive[order]
    st, ch, fr = lane.step[inst], lane.chunk[inst], lane.free[inst]
    p = prompt[index]
    start = arrive + d[:, U][index] * st  # the next engine step boundary
    service = p * (st + lane.full_extra[inst]) / ch  # lane time when prompts queue up (full chunks)
    # The Lindley recursion per instance: D_i = C_i + max(free, max_k<=i (S_k - C_{k-1})).
    new_seg = np.empty(inst.shape[0], dtype=np.bool_)
    new_seg[0] = True
    np.not_equal(inst[1:], inst[:-1], out=new_seg[1:])
    boundary = np.flatnonzero(new_seg)
    csum = np.cumsum(service)
    if boundary.shape[0] == 1:
        local = csum
        x = np.maximum(start - (local - service), rel_free[inst[0]])
        depart = local + np.maximum.accumulate(x)
    else:
        seg = np.cumsum(new_seg) - 1
        local = csum - (csum[boundary] - service[boundary])[seg]
        x = np.maximum(start - (local - service), rel_free[inst])
        lift = seg * (float(x.max() - x.min()) + 1.0)  # each instance's values sit above all earlier ones
        depart = local + np.maximum.accumulate(x + lift) - lift
    extra = profile.prefill_extra_s(p, fr, ch)
    # A prompt alone still waits for the whole step that carries it.
    f = depart + np.maximum(st + extra - service, 0.0)
    first[index] = f + t0
    end[index] = f + d[:, REMAINING][index] / rate[inst]
    served[index] = extra
    last = np.append(boundary[1:] - 1, index.shape[0] - 1)
    rel_free[inst[last]] = depart[last]


def _by_instance_then_arrival(inst: IntArray, arrive: FloatArray) -> IntArray:
    """``np.lexsort((arrive, inst))`` in two stable passes, the second a radix sort on small integers (a
    third of the time)."""
    order = np.argsort(arrive, kind="stable")
    keys = inst[order]
    if keys.max() < 2**16:  # instance slots: a few hundred at most in practice
        keys = keys.astype(np.uint16)
    return order[np.argsort(keys, kind="stable")]


def _step_limited(
    profile: EngineProfile,
    slot: int,
    d: FloatArray,
    inst: IntArray,
    candidates: BoolArray,
    reserve: FloatArray,
    t0: float,
    span: float,
    lane: Lane,
    prompt: FloatArray,
    rate: FloatArray,
    rel_free: FloatArray,
    first: FloatArray,
    end: FloatArray,
    admitted: BoolArray,
    served: FloatArray,
) -> None:
    """An instance whose ``max_num_seqs`` or KV cache can fill up: admit FCFS as sequences finish (in place)."""
    on_slot = inst == slot
    holding = np.flatnonzero(on_slot & admitted)
    heap = list(zip(end[holding].tolist(), reserve[holding].tolist(), strict=True))
    heapq.heapify(heap)
    used_seqs = len(heap)
    used_tokens = float(reserve[holding].sum())
    queue = np.flatnonzero(on_slot & candidates)
    queue = queue[np.argsort(d[queue, COL_T], kind="stable")]
    st, ch, r = float(lane.step[slot]), float(lane.chunk[slot]), float(rate[slot])
    fr, per_token = float(lane.free[slot]), float((lane.step[slot] + lane.full_extra[slot]) / lane.chunk[slot])
    c_p = profile.prefill_s_per_token
    cap_seqs, cap_tokens = profile.max_num_seqs, float(profile.kv_capacity_tokens)
    free_at = float(rel_free[slot])
    for i, arrive, u, p, need, left in _queued_rows(queue, d, t0, prompt, reserve, cap_tokens):
        at = arrive
        while heap and (used_seqs >= cap_seqs or used_tokens + need > cap_tokens):
            finish, tokens = heapq.heappop(heap)
            used_seqs -= 1
            used_tokens -= tokens
            at = max(at, finish)
        if at >= span:
            break  # FCFS: everyone behind it waits too
        service = p * per_token
        depart = max(at + u * st, free_at) + service
        free_at = depart
        extra = max(p * c_p - fr * max(p / ch, 1.0), 0.0)
        f = depart + max(st + extra - service, 0.0)
        e = f + left / r
        first[i] = f + t0
        end[i] = e
        served[i] = extra
        admitted[i] = True
        heapq.heappush(heap, (e, need))
        used_seqs += 1
        used_tokens += need
    rel_free[slot] = free_at


QUEUE_CHUNK = 512  # rows of a queue turned into Python numbers at a time


def _queued_rows(
    queue: IntArray, d: FloatArray, t0: float, prompt: FloatArray, reserve: FloatArray, cap_tokens: float
) -> Iterator[tuple[int, float, float, float, float, float]]:
    """(row, arrival since t0, step phase, prompt tokens, KV tokens reserved (at most the cache), tokens left)
    of ``queue``'s rows in order, a chunk at a time: a backlog behind a full instance can be hundreds of
    thousands of requests, of which a tick admits a few dozen, and turning all of them into Python numbers
    every tick cost more than stepping the admitted ones."""
    for start in range(0, queue.shape[0], QUEUE_CHUNK):
        part = queue[start : start + QUEUE_CHUNK]
        yield from zip(
            part.tolist(),
            np.maximum(d[part, COL_T] - t0, 0.0).tolist(),
            d[part, U].tolist(),
            prompt[part].tolist(),
            np.minimum(reserve[part], cap_tokens).tolist(),
            d[part, REMAINING].tolist(),
            strict=True,
        )
