"""One tick of a serving tier's instances, for all requests at once (pure: state in, state out).

Within a tick each instance runs at a constant decode step time, set by its batch size and KV cache
(estimated from the previous pass). Prompts go through a FIFO "prefill lane" per instance; its exact
departure times come from the Lindley recursion D_i = max(S_i, D_{i-1}) + s_i, solved for every request
of every instance at once with a cumulative sum and a segmented running maximum. Admission limits
(``max_num_seqs``, KV blocks) are checked per instance: when they cannot bind during the tick (the usual
case: even every sequence's final length fits) everything is vectorised; an instance at its limit is stepped
event by event as vLLM's V1 scheduler runs it: FCFS admission while a sequence slot and the blocks of the
request's context are free, each sequence taking a further 16-token block as it grows, and when none is
free the most recently admitted sequence is preempted (its blocks freed, requeued first, recomputed later).

A request whose prompt and output exceed ``max_model_len`` is refused on arrival (vLLM answers HTTP 400).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
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
from scalectl.sizing.kv import BLOCK_TOKENS

QUEUE_CHUNK = 1024  # waiting requests the event-by-event path lists at a time
LOAD_WINDOWS = 5  # windows of a tick in which ``_may_exceed`` bounds an instance's load
COLUMNS_FROM = 20_000  # rows in a tick past which its matrix is laid out by columns (beyond the CPU's caches)


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
    rejected: Requests  # refused on arrival: prompt + output over max_model_len (vLLM's HTTP 400)
    preempted: int = 0  # sequences preempted for KV blocks during the tick (vllm:num_preemptions_total)


def too_long(d: FloatArray, max_model_len: int) -> BoolArray:
    """Requests vLLM refuses with HTTP 400: prompt + requested output over ``--max-model-len``. vLLM's
    OpenAI server compares prompt tokens + ``max_tokens`` (or ``max_completion_tokens``) with max_model_len
    ("'max_tokens' or 'max_completion_tokens' is too large: M. This model's maximum context length is N tokens
    and your request has P input tokens (M > N - P)"; older: "This model's maximum context length is N
    tokens. However, you requested ..."); unset, max_tokens fills what the prompt leaves, and a prompt of
    max_model_len or more is refused (V1's input processor). A trace records the output a request got, which
    its client asked for at least: prompt + output over max_model_len is refused however the client set it."""
    return d[:, N_IN] + d[:, N_OUT] > max_model_len


def blocks(tokens: FloatArray) -> FloatArray:
    """Tokens rounded up to whole KV blocks, in tokens (vLLM allocates 16-token blocks)."""
    return np.ceil(tokens / BLOCK_TOKENS) * BLOCK_TOKENS  # type: ignore[no-any-return]


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

    refused = too_long(new.data, profile.max_model_len)
    rejected = Requests(new.data[refused]) if refused.any() else Requests(new.data[:0])
    if refused.any():
        new = Requests(new.data[~refused])
    d = Requests.concat([carried, new]).data
    if d.shape[0] > COLUMNS_FROM:
        # A backlog (a fleet far behind its traffic) is read column by column below, dozens of times: row-major,
        # each column read sweeps the whole matrix through memory; one copy by columns makes each read contiguous.
        d = np.asfortranarray(d)
    inst = d[:, INST].astype(np.int64)
    first = d[:, FIRST].copy()  # when decoding (re)starts: the first token, or a resume after preemption
    admitted = d[:, ADMITTED] > 0
    remaining = d[:, REMAINING].copy()
    served = np.zeros(d.shape[0])  # step stretching caused by prompts admitted this tick
    end = np.maximum(first - t0, 0.0) + remaining / rate[inst]  # NaN for the not yet admitted
    preempted = 0

    candidates = ~admitted
    if candidates.any():
        # A preempted request (first token delivered, then requeued) recomputes its prompt and its output so far.
        redone = np.where(d[:, TTFT_DONE] > 0, d[:, N_OUT] - remaining, 0.0)
        prompt = np.maximum(d[:, N_IN] - d[:, N_CACHED], 1.0) + redone
        reserve = blocks(d[:, N_IN] + d[:, N_OUT])  # the most KV a sequence ever holds
        count = np.bincount(inst, minlength=n_slots)
        tokens = np.bincount(inst, weights=reserve, minlength=n_slots)
        maybe = (count > profile.max_num_seqs) | (tokens > profile.kv_capacity_tokens)
        saved_free = rel_free.copy()
        cand = np.flatnonzero(candidates)
        _scan_fast(profile, cand, d, inst, t0, lane, prompt, rate, rel_free, first, end, served)
        admitted[cand] = True
        ttft_time = first.copy()
        if maybe.any():
            # Admitting everyone on arrival is right unless the limits were actually reached: check the peak.
            for slot in _over_limit(profile, d, inst, maybe, candidates, t0, span, end, reserve):
                redo = candidates & (inst == slot)
                first[redo], end[redo], served[redo], admitted[redo] = np.nan, np.inf, 0.0, False
                rel_free[slot] = saved_free[slot]
                ttft_time[redo] = np.nan
                preempted += _step_limited(profile, slot, d, inst, candidates, t0, span, lane, prompt, rate,
                                           rel_free, first, end, admitted, served, remaining, ttft_time)  # fmt: skip
    else:
        ttft_time = first.copy()
    end[~admitted] = np.inf

    first_rel = first - t0
    first_seen = admitted & (first_rel <= span)
    # A first token delivered this tick: by a sequence still running, or by one preempted after it.
    fresh_first = (d[:, TTFT_DONE] == 0) & (ttft_time - t0 <= span)
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
    state[:, TTFT_DONE] = np.maximum(state[:, TTFT_DONE], fresh_first[kept])
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
        ttft_at=ttft_time[fresh_first],
        ttft=ttft_time[fresh_first] - d[:, ORIGIN][fresh_first] + d[:, OVERHEAD][fresh_first],
        ttft_origin=d[:, ORIGIN][fresh_first],
        done=Requests(done_rows),
        done_end=done_end,
        done_e2e=done_end - done_rows[:, ORIGIN],
        rejected=rejected,
        preempted=preempted,
    )


def _over_limit(
    profile: EngineProfile,
    d: FloatArray,
    inst: IntArray,
    maybe: BoolArray,
    candidates: BoolArray,
    t0: float,
    span: float,
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
    # Over at the tick's start already (a backlog waiting at t0): the events up to t = 0 are a prefix of the
    # sorted order below, so their sum is a running sum the peak reaches. Those instances skip the sort, the
    # larger the backlog the dearer.
    ends = end[on]
    already = _over_at_start(profile, inst[on], start, ends, reserve[on], maybe.shape[0])
    if already.any():
        rest = ~already[inst[on]]
        on, start, ends = on[rest], start[rest], ends[rest]
        n = on.shape[0]
    found = [int(slot) for slot in np.flatnonzero(already)]
    if not n:
        return found
    # Most instances asked about never reach a limit (four in five): a bound without a sort clears them.
    slots = inst[on]
    possible = _may_exceed(profile, slots, start, ends, reserve[on], maybe.shape[0], span)
    if not possible.any():
        return found
    if not possible[slots].all():
        rest = possible[slots]
        on, start, ends = on[rest], start[rest], ends[rest]
        n = on.shape[0]
    # Finishes first, then starts: at equal times a finish frees its slot before a start takes one, so a
    # stable sort by instance then time is the order (``_by_instance_then_arrival``).
    times = np.concatenate([ends, start])
    delta = np.concatenate([-np.ones(n), np.ones(n)])
    weight = np.concatenate([-reserve[on], reserve[on]])
    slots = np.concatenate([inst[on], inst[on]])
    order = _by_instance_then_arrival(slots, times)
    slots = slots[order]
    first = np.flatnonzero(np.concatenate([[True], slots[1:] != slots[:-1]]))
    over = (_peak_running_sum(delta[order], first) > profile.max_num_seqs) | (
        _peak_running_sum(weight[order], first) > profile.kv_capacity_tokens
    )
    return sorted(found + [int(slot) for slot in slots[first[over]]])


def _may_exceed(
    profile: EngineProfile,
    slots: IntArray,
    start: FloatArray,
    end: FloatArray,
    reserve: FloatArray,
    n_slots: int,
    span: float,
) -> BoolArray:
    """Per slot: whether its requests (each alive from ``start`` to ``end``, holding one sequence and its
    ``reserve`` tokens) could exceed a limit, by a bound that needs no sort. The tick is cut into
    ``LOAD_WINDOWS`` windows; the requests alive at any moment of a window are among those that start
    before the window ends and end after it begins. No window over the limits: the peak is not either."""
    cuts = np.arange(1, LOAD_WINDOWS) * (span / LOAD_WINDOWS)
    # A request counts in the windows from the one its start falls in to the one its end falls in.
    first = np.searchsorted(cuts, start, side="right")
    last = np.maximum(np.searchsorted(cuts, end, side="left"), first - 1)  # an end before its start: nowhere
    row = slots * (LOAD_WINDOWS + 1)
    size, shape = n_slots * (LOAD_WINDOWS + 1), (n_slots, LOAD_WINDOWS + 1)
    seqs = np.bincount(row + first, minlength=size) - np.bincount(row + last + 1, minlength=size)
    tokens = np.bincount(row + first, weights=reserve, minlength=size) - np.bincount(
        row + last + 1, weights=reserve, minlength=size
    )
    seqs_peak = np.cumsum(seqs.reshape(shape), axis=1).max(axis=1)
    tokens_peak = np.cumsum(tokens.reshape(shape), axis=1).max(axis=1)
    return (seqs_peak > profile.max_num_seqs) | (tokens_peak > profile.kv_capacity_tokens)  # type: ignore[no-any-return]


def _over_at_start(
    profile: EngineProfile, inst: IntArray, start: FloatArray, end: FloatArray, reserve: FloatArray, n_slots: int
) -> BoolArray:
    """Per slot: whether what started by t = 0 less what finished by then exceeds a limit (whole numbers: exact)."""
    began, ended = start <= 0.0, end <= 0.0
    seqs = np.bincount(inst, weights=began, minlength=n_slots) - np.bincount(inst, weights=ended, minlength=n_slots)
    tokens = np.bincount(inst, weights=reserve * began, minlength=n_slots) - np.bincount(
        inst, weights=reserve * ended, minlength=n_slots
    )
    return (seqs > profile.max_num_seqs) | (tokens > profile.kv_capacity_tokens)  # type: ignore[no-any-return]


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
    remaining: FloatArray,
    ttft_time: FloatArray,
) -> int:
    """An instance whose ``max_num_seqs`` or KV cache can fill up, event by event (in place); returns the
    sequences preempted.

    As vLLM's V1 scheduler: the waiting queue is admitted first come first served while a sequence slot is
    free and the KV blocks of the request's context (prompt, plus the output so far of a preempted one) fit;
    the head blocks everyone behind it. Every running sequence gains a token per engine step, at the tick's
    rate, and takes a new 16-token block when it crosses one; when no block is free, the most recently
    admitted sequence is preempted: its blocks are freed and it goes back to the head of the queue, to
    recompute its prompt and output so far when admitted again (``--preemption-mode recompute``, V1's only
    mode). Times are seconds since ``t0``."""
    r = float(rate[slot])
    cap_seqs, cap_blocks = profile.max_num_seqs, profile.kv_capacity_tokens // BLOCK_TOKENS
    st, ch = float(lane.step[slot]), float(lane.chunk[slot])
    fr, per_token = float(lane.free[slot]), float((lane.step[slot] + lane.full_extra[slot]) / lane.chunk[slot])
    c_p = profile.prefill_s_per_token
    free_at = float(rel_free[slot])
    # The per-request figures below are read for this instance's rows only: filled for them alone (a tick that
    # steps several instances would otherwise compute every column over all the tick's rows for each one).
    rows = np.flatnonzero(inst == slot)
    size = (d.shape[0],)
    n_in, n_out = d[:, N_IN].take(rows), d[:, N_OUT].take(rows)
    context, final_blocks, arrive = np.empty(size), np.empty(size), np.empty(size)
    context[rows] = n_in + n_out - remaining.take(rows)  # tokens a sequence holds when its decoding (re)starts
    final_blocks[rows] = np.ceil((n_in + n_out) / BLOCK_TOKENS)
    arrive[rows] = np.maximum(d[:, COL_T].take(rows) - t0, 0.0)
    # The running sequences in admission order (the carried ones by when their decoding started).
    holding = rows[admitted.take(rows)]
    holding = holding[np.argsort(first[holding], kind="stable")]
    # The running sequences, in admission order, with when each ends: a dict keeps both (insertion order,
    # the last admitted popped first). A list scanned with numpy scalar reads at every event (who finished,
    # the next finish) cost most of a peak hour's fleet model.
    run: dict[int, float] = {i: float(end[i]) for i in holding.tolist()}
    # The next finish: a heap of (end, serial, sequence); an entry is stale once its sequence finished or was
    # preempted (its serial no longer the one ``serials`` holds). A min over ``run`` at each event cost as much.
    serials = {i: k for k, i in enumerate(run)}
    ending = [(e, k, i) for k, (i, e) in enumerate(run.items())]
    heapq.heapify(ending)
    serial = len(serials)
    start = {i: max(float(first[i]) - t0, 0.0) for i in run}  # decoding (re)starts: tokens grow from here
    held0 = {i: float(context[i]) for i in run}  # tokens held at start[i]
    waiting = rows[candidates.take(rows)]
    waiting = waiting[np.argsort(d[:, COL_T].take(waiting), kind="stable")]
    # The queue takes the waiting requests a chunk at a time: a tick admits a few hundred of a backlog that
    # can hold a hundred thousand, and turning them all into a list each tick cost more than admitting.
    queue: deque[int] = deque(waiting[:QUEUE_CHUNK].tolist())
    queued = QUEUE_CHUNK
    ceiling = float(final_blocks[holding].sum())  # blocks the running sequences hold once they are done
    preempted = 0
    tau, preempted_at = 0.0, -np.inf

    def used(at: float) -> float:
        """Blocks the running sequences hold at ``at``."""
        if not run:
            return 0.0
        n_run = len(run)
        s0 = np.fromiter(map(start.__getitem__, run), np.float64, n_run)
        h0 = np.fromiter(map(held0.__getitem__, run), np.float64, n_run)
        h = h0 + r * np.clip(at - s0, 0.0, np.fromiter(run.values(), np.float64, n_run) - s0)
        return float(np.ceil(h / BLOCK_TOKENS).sum())

    def block_full(at: float, until: float) -> float:
        """When a running sequence first needs a block none is free for, before ``until`` (else inf)."""
        if ceiling <= cap_blocks or not run:
            return np.inf
        spare = int(cap_blocks - used(at))
        n_run = len(run)
        s0 = np.fromiter(map(start.__getitem__, run), np.float64, n_run)
        h0 = np.fromiter(map(held0.__getitem__, run), np.float64, n_run)
        now = h0 + r * np.maximum(at - s0, 0.0)
        # The next crossing of each sequence: when its tokens pass the blocks it holds; then one per block.
        nxt = s0 + (np.ceil(now / BLOCK_TOKENS) * BLOCK_TOKENS - h0) / r
        nxt = np.maximum(nxt, np.maximum(s0, at))
        stop = np.minimum(np.fromiter(run.values(), np.float64, n_run), until)
        period = BLOCK_TOKENS / r
        n = np.where(nxt < stop, np.ceil((stop - nxt) / period), 0.0).astype(np.int64)
        if int(n.sum()) <= spare:
            return np.inf
        times = np.repeat(nxt, n) + period * (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
        return float(np.partition(times, spare)[spare])

    def next_end() -> float:
        while ending and serials.get(ending[0][2]) != ending[0][1]:
            heapq.heappop(ending)
        return ending[0][0] if ending else np.inf

    while True:
        while next_end() <= tau:  # finished: their blocks go back
            _, _, i = heapq.heappop(ending)
            del run[i], serials[i]
            ceiling -= float(final_blocks[i])
        # A step that preempted admits nobody (V1 schedules the waiting queue only when nothing was preempted).
        while queue and arrive[queue[0]] <= tau and len(run) < cap_seqs and tau > preempted_at:
            i = queue[0]
            need = math.ceil(float(context[i]) / BLOCK_TOKENS)
            if ceiling + need > cap_blocks and used(tau) + need > cap_blocks:
                break  # FCFS: everyone behind it waits too
            queue.popleft()
            if not queue and queued < waiting.shape[0]:
                queue.extend(waiting[queued : queued + QUEUE_CHUNK].tolist())
                queued += QUEUE_CHUNK
            p = float(prompt[i])
            service = p * per_token
            depart = max(tau + float(d[i, U]) * st, free_at) + service
            free_at = depart
            extra = max(p * c_p - fr * max(p / ch, 1.0), 0.0)
            f = depart + max(st + extra - service, 0.0)
            e = f + float(remaining[i]) / r
            first[i], end[i], served[i], admitted[i] = f + t0, e, extra, True
            if math.isnan(ttft_time[i]):
                ttft_time[i] = f + t0
            run[i] = e
            serials[i] = serial
            heapq.heappush(ending, (run[i], serial, i))
            serial += 1
            start[i], held0[i] = f, float(context[i])
            ceiling += float(final_blocks[i])
        finish = next_end()
        coming = float(arrive[queue[0]]) if queue and arrive[queue[0]] > tau else np.inf
        horizon = min(finish, coming, span)
        full = block_full(tau, horizon)
        if full >= horizon:
            if horizon >= span:
                break
            tau = horizon
            continue
        tau = full
        victim, _ = run.popitem()  # the most recently admitted sequence
        del serials[victim]
        ceiling -= float(final_blocks[victim])
        made = r * min(max(tau - start[victim], 0.0), float(end[victim]) - start[victim])
        remaining[victim] -= made
        context[victim] += made
        prompt[victim] = (
            max(float(d[victim, N_IN] - d[victim, N_CACHED]), 1.0) + float(d[victim, N_OUT]) - float(remaining[victim])
        )
        if ttft_time[victim] - t0 > tau:  # preempted before its first token: no first token yet
            ttft_time[victim] = np.nan
        first[victim], end[victim], admitted[victim] = np.nan, np.inf, False
        queue.appendleft(victim)
        preempted += 1
        preempted_at = tau
    rel_free[slot] = free_at
    return preempted
