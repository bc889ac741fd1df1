"""A serving tier's instances: membership, least-connections routing, ticks, signals and records."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from scalectl.policies.types import Signals
from scalectl.simulator.latency_histogram import LatencyHistogram
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
    RETRIES,
    ROUND,
    SESSION,
    TTFT_DONE,
    BoolArray,
    FloatArray,
    IntArray,
    Requests,
    U,
    empty,
)
from scalectl.simulator.requests import T as COL_T
from scalectl.simulator.serving_tick import Estimates, Lane, TickResult, lane_for, simulate_tick
from scalectl.sizing.engine import EngineProfile

MAX_CLOSED_LOOP_PASSES = 4
REPASS_CHANGE = 0.5  # re-run an open-loop tick when the batch estimate was off by more than this
TOLERATED_MISMATCH = 0.02  # share of a tick's closed-loop requests the forecast may get wrong without a re-run


class OpenSource(Protocol):
    """Traffic that does not wait for answers (traces, Poisson)."""

    def arrivals(self, t0: float, t1: float) -> Requests: ...


class ClosedSource(Protocol):
    """Sessions that send their next request a think time after the previous answer."""

    closed_loop: bool

    def begin_tick(self, t0: float, t1: float) -> Requests: ...

    def next_sends(
        self, session: IntArray, round_: IntArray, end: FloatArray, t1: float
    ) -> tuple[IntArray, IntArray, FloatArray]:
        """(session, round, time) of the requests sent before ``t1`` after answers to ``round_`` at ``end``."""
        ...

    def figures(self, session: IntArray, round_: IntArray) -> tuple[FloatArray, ...]:
        """(prompt tokens to compute, output tokens, step phase u, client overhead) of those requests."""
        ...

    def make(self, session: IntArray, round_: IntArray, t: FloatArray) -> Requests: ...

    def commit(self, sent: Requests, done: Requests, done_end: FloatArray, t1: float) -> None: ...


def least_connections(loads: np.ndarray, n: int) -> IntArray:
    """Which of ``len(loads)`` instances each of ``n`` arrivals goes to, in order (nginx ``least_conn``).

    How many each instance takes is least-connections over the tick: the arrivals level the connection
    counts from the tick's start, the emptiest first (ties to the lowest index). When each takes them is
    spread evenly over the tick: connections finish all through it, so nginx's choice moves between the
    instances with every arrival. Handing the tick's arrivals out in arrival order instead (the first
    dozens all to whichever instance started the tick emptiest) made bursts no balancer makes: 14 instances
    at 28.6 req/s each met 90% of a 500 ms target where one instance at that rate met 99.6%.
    """
    k = loads.shape[0]
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    take = _levelled(loads.astype(np.int64), n)
    # Instance i's j-th arrival sits at (j + 1/2) / take[i] of the tick; arrivals go out in that order (ties
    # to the lower index: ``mine`` ascends, and the sort is stable).
    mine = np.repeat(np.arange(k), take)
    position = (np.arange(n) - (np.cumsum(take) - take)[mine] + 0.5) / take[mine]
    return mine[np.argsort(position, kind="stable")]


def _levelled(base: IntArray, n: int) -> IntArray:
    """How many of ``n`` arrivals each instance takes when each goes to the instance with the fewest
    connections (ties to the lowest index): all below a water level, and the last few at the level, lowest
    index first. (Sorting every connection slot to find them cost more than the rest of the routing.)"""
    loads = np.sort(base).tolist()
    below = 0
    for active in range(1, len(loads) + 1):  # the emptiest ``active`` instances fill up to ``level``
        below += loads[active - 1]
        level = (n + below) // active
        if active == len(loads) or level <= loads[active]:
            break
    take = np.maximum(level - base, 0)
    at_level = np.flatnonzero(base <= level)[: n - int(take.sum())]
    take[at_level] += 1
    return take


@dataclass(frozen=True, slots=True)
class HoldBounds:
    """The daemon's activator at zero (``activator.max_held``, ``activator.max_wait``): requests beyond the
    first ``max_held`` are refused (503), and a held request not handed on within ``max_wait`` gets 503."""

    max_held: int
    max_wait: float


@dataclass(slots=True)
class PoolRecord:
    """What a pool saw, for the report: per-request samples and a per-tick timeline."""

    ttft_at: list[FloatArray] = field(default_factory=list)
    ttft: list[FloatArray] = field(default_factory=list)
    ttft_origin: list[FloatArray] = field(default_factory=list)  # when those requests were sent
    e2e: list[FloatArray] = field(default_factory=list)
    timeline: list[tuple[float, int, int, int, int]] = field(default_factory=list)  # t1, arrivals, ready, run, wait
    arrivals: int = 0
    retries: int = 0
    abandoned: int = 0  # requests whose client gave up before the first token (recorded as misses)
    refused: int = 0  # requests the activator refused at zero, already holding its most (TTFT recorded as inf)
    rejected_too_long: int = 0  # refused by vLLM: prompt + output over max_model_len (HTTP 400; TTFT inf)
    preemptions: int = 0  # sequences preempted for KV blocks (vllm:num_preemptions_total)
    since: float = -np.inf  # requests sent before this are not judged (a steady start's warm-up)

    def judged(self, at: FloatArray, ttft: FloatArray, origin: FloatArray) -> int:
        """Requests judged: when (first token, cut or refused), their client-side TTFT and when they were sent.
        Returns how many count (those sent from ``since`` on)."""
        if self.since > -np.inf:
            mine = origin >= self.since
            at, ttft, origin = at[mine], ttft[mine], origin[mine]
        self.ttft_at.append(at.astype(np.float32))
        self.ttft.append(ttft.astype(np.float32))
        self.ttft_origin.append(origin.astype(np.float32))
        return int(origin.shape[0])


@dataclass(frozen=True, slots=True)
class PoolCheckpoint:
    """A pool's state at a tick boundary, to run the next stretch again from it (the measured oracle tries
    several fleet sizes on each minute). Arrays the pool replaces rather than changes are shared."""

    ids: tuple[str, ...]
    slot_of: dict[str, int]
    routable: np.ndarray
    retired: frozenset[int]
    est: Estimates
    prefill_free: FloatArray
    inflight: Requests
    unrouted: Requests
    window: tuple[tuple[float, np.ndarray, int, np.ndarray, int], ...]
    window_tokens: FloatArray
    hist: LatencyHistogram
    window_arrivals: int
    window_done: int
    last_arrivals: int
    recorded: tuple[int, int, int, int, int, int, int, int, int, int, int]  # lengths of the record's lists,
    # arrivals, retries, abandoned, refused, rejected_too_long, preemptions


class ServingPool:
    """Instances of one serving tier, all with the same engine profile."""

    def __init__(
        self,
        profile: EngineProfile,
        window_s: float = 60.0,
        client_timeout: float | None = None,
        hold: HoldBounds | None = None,
    ) -> None:
        self.profile = profile
        self.window_s = window_s
        self.client_timeout = client_timeout  # None: clients wait for their first token for ever
        self.hold = hold  # the activator's bounds on requests held at zero; None: held without bound
        self._ids: list[str] = []
        self._slot_of: dict[str, int] = {}
        self._routable = np.zeros(0, dtype=np.bool_)
        self._retired: set[int] = set()
        self._est = Estimates(np.zeros(0), np.zeros(0), np.zeros(0))
        self._lane_cache: tuple[Estimates, tuple[Lane, FloatArray]] | None = None
        self._prefill_free = np.zeros(0)
        self._inflight = empty()
        self._unrouted = empty()  # requests with no instance to go to (held at the load balancer)
        # Per tick: its end, TTFT histogram counts, arrivals, tokens (below) and requests finished.
        self._window: deque[tuple[float, np.ndarray, int, np.ndarray, int]] = deque()
        # Tokens of the requests that arrived in the window: prompt, prompt found in the prefix cache, output
        # (vLLM's counters count them as served; arrivals are what a fleet that keeps up serves).
        self._window_tokens = np.zeros(3)
        self._hist = LatencyHistogram()
        self._window_arrivals = 0
        self._window_done = 0
        self._last_arrivals = 0
        self._started: float | None = None  # the first tick's start: a young window spans less than window_s
        self.record = PoolRecord()

    # ---- membership -------------------------------------------------------------------------------------
    @property
    def ready_ids(self) -> list[str]:
        return [i for i, s in self._slot_of.items() if self._routable[s]]

    def set_instances(self, ready: Iterable[str], draining: Iterable[str] = (), now: float = 0.0) -> None:
        """Make ``ready`` the routable set and ``draining`` finish their work without new requests.

        A ready instance that vanishes without draining lost its work: its requests are retried elsewhere.
        A draining instance that vanishes finishes its requests (vLLM's graceful shutdown) before it goes.
        """
        ready_set, drain_set = set(ready), set(draining)
        known = ready_set | drain_set
        for iid in sorted(known):
            if iid not in self._slot_of:
                self._add_slot(iid)
        vanished = [i for i, s in self._slot_of.items() if i not in known and self._routable[s]]
        if vanished:
            self.interrupt(vanished, now)
        self._retired = {s for i, s in self._slot_of.items() if i not in known}
        for iid, slot in self._slot_of.items():
            self._routable[slot] = iid in ready_set and iid not in drain_set

    def interrupt(self, ids: Iterable[str], now: float) -> int:
        """Instances lost without notice (spot preemption): their requests go back to the balancer."""
        slots = [self._slot_of.pop(i) for i in ids if i in self._slot_of]
        if not slots:
            return 0
        self._routable[slots] = False
        self._retired.difference_update(slots)
        lost = np.isin(self._inflight.icol(INST), slots)
        if not lost.any():
            return 0
        moved = self._inflight.data[lost].copy()
        moved[:, COL_T] = np.maximum(moved[:, COL_T], now)
        moved[:, RETRIES] += 1
        moved[:, INST], moved[:, ADMITTED], moved[:, FIRST] = -1.0, 0.0, np.nan
        moved[:, REMAINING] = moved[:, N_OUT] - 1.0
        self._unrouted = Requests.concat([self._unrouted, Requests(moved)])
        self._inflight = Requests(self._inflight.data[~lost])
        self.record.retries += moved.shape[0]
        return int(moved.shape[0])

    def _add_slot(self, iid: str) -> None:
        self._slot_of[iid] = len(self._ids)
        self._ids.append(iid)
        self._routable = np.append(self._routable, True)
        est = self._est
        self._est = Estimates(
            np.append(est.batch, 0.0), np.append(est.kv_tokens, 0.0), np.append(est.prefill_busy, 0.0)
        )
        self._prefill_free = np.append(self._prefill_free, -np.inf)

    # ---- checkpoints -------------------------------------------------------------------------------------
    def checkpoint(self) -> PoolCheckpoint:
        rec = self.record
        return PoolCheckpoint(
            tuple(self._ids), dict(self._slot_of), self._routable.copy(), frozenset(self._retired), self._est,
            self._prefill_free, self._inflight, self._unrouted, tuple(self._window), self._window_tokens.copy(),
            self._hist.copy(), self._window_arrivals, self._window_done, self._last_arrivals,
            (len(rec.ttft_at), len(rec.ttft), len(rec.ttft_origin), len(rec.e2e), len(rec.timeline), rec.arrivals,
             rec.retries, rec.abandoned, rec.refused, rec.rejected_too_long, rec.preemptions),
        )  # fmt: skip

    def restore(self, cp: PoolCheckpoint) -> None:
        """Back to ``cp``: state, sliding window and record (what was recorded since is dropped)."""
        self._ids, self._slot_of, self._routable = list(cp.ids), dict(cp.slot_of), cp.routable.copy()
        self._retired, self._est, self._prefill_free = set(cp.retired), cp.est, cp.prefill_free
        self._inflight, self._unrouted, self._window = cp.inflight, cp.unrouted, deque(cp.window)
        self._window_tokens, self._hist = cp.window_tokens.copy(), cp.hist.copy()
        self._window_arrivals, self._window_done = cp.window_arrivals, cp.window_done
        self._last_arrivals = cp.last_arrivals
        self._lane_cache = None
        rec = self.record
        n_at, n_ttft, n_origin, n_e2e, n_timeline, rec.arrivals, rec.retries, rec.abandoned, rec.refused, *rest = (
            cp.recorded
        )
        rec.rejected_too_long, rec.preemptions = rest
        del rec.ttft_at[n_at:], rec.ttft[n_ttft:], rec.ttft_origin[n_origin:], rec.e2e[n_e2e:]
        del rec.timeline[n_timeline:]

    # ---- time --------------------------------------------------------------------------------------------
    def advance(self, t0: float, t1: float, source: OpenSource | ClosedSource | None) -> None:
        """Move the tier from ``t0`` to ``t1`` under ``source``'s traffic."""
        self._prefill_free = np.maximum(self._prefill_free, t0 - 1.0)
        if self._started is None:
            self._started = t0
        if source is not None and getattr(source, "closed_loop", False):
            result, sent = self._advance_closed(t0, t1, source)  # type: ignore[arg-type]
        else:
            self._abandon(t0)
            sent = source.arrivals(t0, t1) if source is not None else empty()  # type: ignore[union-attr]
            result = self._run(t0, t1, sent, self._est)
            off = self._estimates_off(result.during)
            if off is not None:
                result = self._run(t0, t1, sent, _instead(off, result.during, self._est))
        self._commit(t1, result, sent)

    def _abandon(self, now: float) -> None:
        """Requests still waiting for an engine slot (or, at zero, at the balancer) ``client_timeout`` after
        their clients sent them are gone: nginx cut the connection and vLLM aborted them. At the balancer
        the activator's ``max_wait`` applies too, if sooner (it answers 503). Each is recorded
        as a miss whose first token would have come no sooner than now; vLLM's TTFT histogram (the
        signals) never sees them."""
        at_balancer = [w for w in (self.client_timeout, self.hold.max_wait if self.hold else None) if w is not None]
        parts = []
        for attr, limit in (("_inflight", self.client_timeout), ("_unrouted", min(at_balancer, default=None))):
            d = getattr(self, attr).data
            if limit is None or not d.shape[0]:
                continue
            # An admitted request's prefill is under way; a retry that had its first token is streaming.
            gone = (d[:, ORIGIN] <= now - limit) & (d[:, ADMITTED] == 0) & (d[:, TTFT_DONE] == 0)
            if gone.any():
                parts.append(d[gone, ORIGIN])
                setattr(self, attr, Requests(d[~gone]))
        if not parts:
            return
        origin = np.concatenate(parts)
        self.record.abandoned += self.record.judged(np.full(origin.shape[0], now), now - origin, origin)

    def _held(self, waiting: Requests) -> Requests:
        """At zero, the activator holds at most ``max_held`` requests, the first to come; each one after is
        answered 503 at once: a miss that never has a first token (recorded with an infinite TTFT)."""
        limit = None if self.hold is None else self.hold.max_held
        if limit is None or len(waiting) <= limit:
            return waiting
        ordered = waiting.sorted_by_time()
        kept, refused = ordered.data[:limit], ordered.data[limit:]
        self.record.refused += self.record.judged(
            refused[:, COL_T], np.full(refused.shape[0], np.inf), refused[:, ORIGIN]
        )
        return Requests(kept)

    def _advance_closed(self, t0: float, t1: float, source: ClosedSource) -> tuple[TickResult, Requests]:
        """Sessions answer within the tick and send again: find the tick's requests, then simulate them.

        A cheap forecast of every round (no prefill queueing) gives the set of requests; the full model then
        runs once, and again only if its answers add or remove more than a few requests (a reply landing
        right at the tick's edge). The few left over are fixed up at commit (the session's next request
        goes out a little early or late).
        """
        first = source.begin_tick(t0, t1)
        s, r, t = self._forecast_rounds(t0, t1, first, source)
        sent = Requests.concat([first, source.make(s, r, t)])
        keys = _keys(sent.icol(SESSION), sent.icol(ROUND))
        result = self._run(t0, t1, sent, self._est)
        for _ in range(MAX_CLOSED_LOOP_PASSES):
            done, done_end = _answered(result)
            s, r, t = source.next_sends(done.icol(SESSION), done.icol(ROUND), done_end, t1)
            new_keys = _keys(np.concatenate([first.icol(SESSION), s]), np.concatenate([first.icol(ROUND), r]))
            differ = np.setxor1d(keys, new_keys, assume_unique=True).shape[0]
            if differ <= TOLERATED_MISMATCH * max(new_keys.shape[0], 1):
                break
            keys, sent = new_keys, Requests.concat([first, source.make(s, r, t)])
            result = self._run(t0, t1, sent, self._est)
        source.commit(sent, *_answered(result), t1)
        return result, sent

    def _forecast_rounds(
        self, t0: float, t1: float, first: Requests, source: ClosedSource
    ) -> tuple[IntArray, IntArray, FloatArray]:
        """Every follow-up request of the tick, from a latency forecast without prefill queueing."""
        no_int = np.empty(0, dtype=np.int64)
        if not self._routable.any():
            return no_int, no_int, np.empty(0)
        routable = self._routable
        lane, rate = self._lane(self._est)
        d = self._inflight.data
        on = (d[:, ADMITTED] > 0) & (d[:, SESSION] >= 0)
        end = _decode_end(d, on, t0, rate) + d[:, OVERHEAD][on]
        session, round_ = d[:, SESSION][on].astype(np.int64), d[:, ROUND][on].astype(np.int64)
        # Averages over the ready instances stand in for whichever instance a request will land on.
        step, free, chunk, r = (float(x[routable].mean()) for x in (lane.step, lane.free, lane.chunk, rate))
        free_a, chunk_a = np.full(1, free), np.full(1, chunk)
        cur_s, cur_r, cur_t = first.icol(SESSION), first.icol(ROUND), first.col(COL_T)
        out_s, out_r, out_t = [], [], []
        for generation in range(1024):
            if cur_s.shape[0]:
                if generation:
                    prompt, n_out, u, overhead = source.figures(cur_s, cur_r)
                else:
                    prompt = np.maximum(first.col(N_IN) - first.col(N_CACHED), 1.0)
                    n_out, u, overhead = first.col(N_OUT), first.col(U), first.col(OVERHEAD)
                extra = self.profile.prefill_extra_s(prompt, free_a, chunk_a)
                cur_end = cur_t + (u + 1.0) * step + extra + (n_out - 1.0) / r + overhead
                session = np.concatenate([session, cur_s])
                round_ = np.concatenate([round_, cur_r])
                end = np.concatenate([end, cur_end])
            cur_s, cur_r, cur_t = source.next_sends(session, round_, end, t1)
            if not cur_s.shape[0]:
                break
            out_s.append(cur_s)
            out_r.append(cur_r)
            out_t.append(cur_t)
            session, round_, end = no_int, no_int, np.empty(0)
        if not out_s:
            return no_int, no_int, np.empty(0)
        return np.concatenate(out_s), np.concatenate(out_r), np.concatenate(out_t)

    def _estimates_off(self, during: Estimates) -> BoolArray | None:
        """The instances whose batch during the tick was off the estimate by more than ``REPASS_CHANGE``."""
        used = self._est
        if during.batch.shape != used.batch.shape or not during.batch.shape[0]:
            return None
        off = np.abs(during.batch - used.batch) / np.maximum(used.batch, 16.0) > REPASS_CHANGE
        return off if off.any() else None

    def _run(self, t0: float, t1: float, arrivals: Requests, est: Estimates) -> TickResult:
        routable = np.flatnonzero(self._routable)
        if routable.shape[0]:
            incoming = Requests.concat([self._unrouted, arrivals]).sorted_by_time()
            loads = self._staying(t0, t1, est)[routable]
            incoming.data[:, INST] = routable[least_connections(loads, len(incoming))]
        else:
            incoming = empty()
        return simulate_tick(self.profile, est, self._prefill_free, self._inflight, incoming, t0, t1, self._lane(est))

    def _staying(self, t0: float, t1: float, est: Estimates) -> IntArray:
        """Per slot, the connections that stay open through the tick: those open at its start, less the
        decoding requests that finish before its end. nginx counts connections as they close, so an
        instance whose requests end during the tick takes arrivals in their place; counting only the
        tick's start sent a whole tick's arrivals to whichever instance began it emptiest, and the
        instances' loads swung between half and twice the mean from one tick to the next."""
        d = self._inflight.data
        inst = d[:, INST].astype(np.int64)
        open_now = np.bincount(inst, minlength=len(self._ids))
        decoding = d[:, ADMITTED] > 0
        if not decoding.any():
            return open_now
        _, rate = self._lane(est)
        ending = inst[decoding][_decode_end(d, decoding, t0, rate) <= t1]
        return open_now - np.bincount(ending, minlength=len(self._ids))

    def _lane(self, est: Estimates) -> tuple[Lane, FloatArray]:
        """The engine figures of ``est``, computed once per estimate (a closed-loop tick asks twice)."""
        cached = self._lane_cache
        if cached is None or cached[0] is not est:
            cached = self._lane_cache = (est, lane_for(self.profile, est))
        return cached[1]

    def _commit(self, t1: float, result: TickResult, sent: Requests) -> None:
        if self._routable.any():
            self._unrouted = empty()
        else:
            self._unrouted = self._held(Requests.concat([self._unrouted, sent]))
        self._inflight = result.inflight
        self._prefill_free = result.prefill_free
        self._est = result.at_end
        if self._retired:  # instances removed while draining go once they are empty
            busy = np.bincount(self._inflight.icol(INST), minlength=len(self._ids)) > 0
            for slot in [s for s in self._retired if not busy[s]]:
                self._retired.discard(slot)
                self._slot_of.pop(self._ids[slot], None)
        rec = self.record
        fresh = sent.col(RETRIES) == 0
        n_new = int(fresh.sum())
        tokens = np.array([sent.col(N_IN)[fresh].sum(), sent.col(N_CACHED)[fresh].sum(), sent.col(N_OUT)[fresh].sum()])
        rec.arrivals += n_new
        self._last_arrivals = n_new
        rec.judged(result.ttft_at, result.ttft, result.ttft_origin)
        rejected = result.rejected.data
        if rejected.shape[0]:  # vLLM's 400: a miss that never has a first token (TTFT inf)
            rec.rejected_too_long += rec.judged(
                rejected[:, COL_T], np.full(rejected.shape[0], np.inf), rejected[:, ORIGIN]
            )
        rec.preemptions += result.preempted
        rec.e2e.append(result.done_e2e.astype(np.float32))
        # Sliding window of TTFT as a histogram, like vLLM's own metric read over `window_s`.
        counts = self._hist.counts(result.ttft)
        self._hist.add(counts)
        n_done = len(result.done_e2e)
        self._window.append((t1, counts, n_new, tokens, n_done))
        self._window_arrivals += n_new
        self._window_done += n_done
        self._window_tokens += tokens
        while self._window and self._window[0][0] <= t1 - self.window_s:
            _, old, n_old, old_tokens, old_done = self._window.popleft()
            self._hist.remove(old)
            self._window_arrivals -= n_old
            self._window_done -= old_done
            self._window_tokens -= old_tokens
        running = int((self._inflight.col(ADMITTED) > 0).sum())
        waiting_now = len(self._inflight) - running + len(self._unrouted)
        rec.timeline.append((t1, n_new, int(self._routable.sum()), running, waiting_now))

    # ---- observation -------------------------------------------------------------------------------------
    def awaiting_first_token(self) -> FloatArray:
        """Origins of the requests that have not had their first token yet (in instances or unrouted)."""
        d = self._inflight.data
        return np.concatenate([d[d[:, TTFT_DONE] == 0, ORIGIN], self._unrouted.data[:, ORIGIN]])

    def held(self) -> int:
        """Requests waiting at the load balancer for an instance to go to (the activator, at zero)."""
        return len(self._unrouted)

    def take_held(self) -> Requests:
        """Hand over the requests waiting at the balancer (a tier's variants: to a pool that has instances)."""
        held, self._unrouted = self._unrouted, empty()
        return held

    def add_held(self, requests: Requests) -> None:
        """Requests to route with the next tick's arrivals (held elsewhere until now)."""
        if len(requests):
            self._unrouted = Requests.concat([self._unrouted, requests])

    def ttft_window(self) -> LatencyHistogram:
        """The sliding window's TTFT histogram (what ``signals`` reads its quantiles from)."""
        return self._hist

    def in_flight_by_instance(self) -> dict[str, int]:
        counts = np.bincount(self._inflight.icol(INST), minlength=len(self._ids))
        return {iid: int(counts[s]) for iid, s in self._slot_of.items()}

    def signals(self) -> Signals:
        """What the ready instances' vLLM /metrics would say, aggregated over the tier (None = no source)."""
        ready = int(self._routable.sum())
        d = self._inflight.data
        admitted = d[:, ADMITTED] > 0
        running = float(admitted.sum())
        waiting_now = float(d.shape[0] - running + len(self._unrouted))
        kv = None
        if ready:
            on = admitted & self._routable[d[:, INST].astype(np.int64)]
            used = (d[:, N_IN][on] + d[:, N_OUT][on] - d[:, REMAINING][on]).sum()
            kv = float(min(used / (ready * self.profile.kv_capacity_tokens), 1.0))
        q = self._hist.quantiles((0.5, 0.95, 0.99))
        prompt, cached, output = (max(float(v), 0.0) for v in self._window_tokens)  # float noise of the sums
        # Rates over the time the window spans, as the /metrics reader divides by its snapshots' span: in the
        # first minute a full window's length would read a fraction of the real rates.
        span = self.window_s
        if self._window and self._started is not None:
            span = min(self.window_s, max(self._window[-1][0] - self._started, 1e-9))
        return Signals(
            ttft_p50_s=q[0] if q else None,
            ttft_p95_s=q[1] if q else None,
            ttft_p99_s=q[2] if q else None,
            requests_waiting=waiting_now if ready else None,
            requests_running=running if ready else None,
            kv_cache_usage=kv,
            arrivals=float(self._last_arrivals),
            request_rate=self._window_arrivals / span,
            finish_rate=self._window_done / span if ready else None,
            prompt_tokens_rate=prompt / span if ready else None,  # no endpoint answers: unknown
            generation_tokens_rate=output / span if ready else None,
            prefix_cache_hit_rate=cached / prompt if ready and prompt > 0 else None,
        )


def _instead(off: BoolArray, during: Estimates, est: Estimates) -> Estimates:
    """The estimates to run a tick again with: the tick's own figures for the instances whose batch moved
    (``off``), the same as before for the rest. Every instance's figures replaced whenever one moved made a
    saturated fleet's tick run again nearly every time on averages that slowed each full instance: 23
    instances at their admission limit served 9.5 requests a second each where one alone serves 19.5
    (``bench/bench_saturation.py``)."""
    return Estimates(
        np.where(off, during.batch, est.batch),
        np.where(off, during.kv_tokens, est.kv_tokens),
        np.where(off, during.prefill_busy, est.prefill_busy),
    )


def _answered(result: TickResult) -> tuple[Requests, FloatArray]:
    """The requests answered in the tick and when their clients had the answer: those served, and those
    vLLM refused as too long (its 400 comes back at once, after the client's own overhead)."""
    rejected = result.rejected
    if not len(rejected):
        return result.done, result.done_end
    at = rejected.col(COL_T) + rejected.col(OVERHEAD)
    return Requests.concat([result.done, rejected]), np.concatenate([result.done_end, at])


def _decode_end(d: FloatArray, on: np.ndarray, t0: float, rate: FloatArray) -> FloatArray:
    """When the admitted requests ``on`` (rows of ``d``) finish decoding at their instances' rates, before
    client overhead: from their first token (or the tick's start), their remaining tokens."""
    # A column, then its rows: half the time of d[on, c].
    first, remaining, inst = d[:, FIRST][on], d[:, REMAINING][on], d[:, INST][on].astype(np.int64)
    return t0 + np.maximum(first - t0, 0.0) + remaining / rate[inst]


def _keys(session: IntArray, round_: IntArray) -> np.ndarray:
    return np.unique(session * 4096 + round_)
