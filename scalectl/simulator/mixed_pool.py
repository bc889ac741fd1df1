"""A serving tier on several kinds of hardware (its ``variants``): one ``ServingPool`` per kind, behind one
load balancer that weights each instance by its capacity (the routing weights the daemon gives nginx).

Each tick's arrivals are split among the pools as nginx's weighted ``least_conn`` would: each pool's ready
instances weigh their capacity in primary units (``TierSpec.capacity_units``: the controller's own estimate,
so a variant it overrates takes more than it can serve here, as it would in production), and requests go
where the pools' connections ÷ weight is lowest; requests held while no pool has an instance go to the first pool that
gets one. The tier's record and signals are the pools' together, as the tier's /metrics would read them.
Open-loop traffic only: a closed-loop session's next request depends on where its last one ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from scalectl.policies.types import Signals
from scalectl.simulator.latency_histogram import LatencyHistogram
from scalectl.simulator.requests import FloatArray, Requests, empty
from scalectl.simulator.serving_pool import OpenSource, PoolRecord, ServingPool


def weighted_least_connections(busy: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """How many of ``n`` new requests each pool gets under nginx's weighted ``least_conn``: each goes where
    connections ÷ weight is lowest, so the pools are levelled at ``(busy + taken) ÷ weight`` (pools without
    weight take none). A pool with a backlog takes less until the others catch up."""
    on = weights > 0
    w, b = weights[on], busy[on].astype(np.float64)
    lo, hi = 0.0, float(((b + n) / w).max())
    for _ in range(60):  # bisect the level that takes exactly n
        mid = (lo + hi) / 2
        if np.maximum(mid * w - b, 0.0).sum() < n:
            lo = mid
        else:
            hi = mid
    share = np.maximum(hi * w - b, 0.0)
    take = np.floor(share).astype(np.int64)
    rest = n - int(take.sum())
    if rest > 0:  # the remainder to the largest fractions (ties: the first pools)
        take[np.argsort(-(share - take), kind="stable")[:rest]] += 1
    elif rest < 0:
        for i in np.argsort(-take, kind="stable")[:-rest]:
            take[i] -= 1
    out = np.zeros(weights.shape[0], dtype=np.int64)
    out[on] = take
    return out


class _Given:
    """One pool's share of a tick's arrivals, as a source."""

    def __init__(self, requests: Requests) -> None:
        self._requests = requests

    def arrivals(self, _t0: float, _t1: float) -> Requests:
        return self._requests


class MixedPool:
    """``pools``: one per hardware label, the primary first; ``units``: each label's weight per instance."""

    def __init__(self, pools: Mapping[str, ServingPool], units: Mapping[str, float], seed: int) -> None:
        self.pools = dict(pools)
        self.primary = next(iter(self.pools))
        self.units = dict(units)
        self._label_of: dict[str, str] = {}
        self._rng = np.random.default_rng(seed)
        self._record = PoolRecord()
        self._seen: dict[str, int] = dict.fromkeys(self.pools, 0)  # record chunks already merged, per pool

    # ---- membership -------------------------------------------------------------------------------------
    def place(self, iid: str, label: str) -> None:
        """Which hardware an instance runs on (before it is first set); unknown labels: the primary's."""
        self._label_of[iid] = label if label in self.pools else self.primary

    def _mine(self, label: str, ids: Iterable[str]) -> list[str]:
        return [i for i in ids if self._label_of.get(i, self.primary) == label]

    def set_instances(self, ready: Iterable[str], draining: Iterable[str] = (), now: float = 0.0) -> None:
        ready, draining = list(ready), list(draining)
        for label, pool in self.pools.items():
            pool.set_instances(self._mine(label, ready), self._mine(label, draining), now)
        self._rehome()

    def interrupt(self, ids: Iterable[str], now: float) -> int:
        ids = list(ids)
        moved = sum(pool.interrupt(self._mine(label, ids), now) for label, pool in self.pools.items())
        self._rehome()
        return moved

    def _rehome(self) -> None:
        """Requests held by a pool with no ready instance go to the pool with the most ready capacity."""
        weights = self._weights()
        if not any(weights.values()):
            return
        best = max(weights, key=lambda label: weights[label])
        for label, pool in self.pools.items():
            if not weights[label] and pool.held():
                self.pools[best].add_held(pool.take_held())

    def _weights(self) -> dict[str, float]:
        return {label: len(pool.ready_ids) * self.units[label] for label, pool in self.pools.items()}

    # ---- time --------------------------------------------------------------------------------------------
    def advance(self, t0: float, t1: float, source: OpenSource | None) -> None:
        sent = source.arrivals(t0, t1) if source is not None else empty()
        labels = list(self.pools)
        weights = np.array([self._weights()[label] for label in labels])
        which = np.zeros(len(sent), dtype=np.int64)  # nothing ready anywhere: held in the primary's pool
        if weights.sum() > 0 and len(sent):
            busy = np.array([sum(p.in_flight_by_instance().values()) + p.held() for p in self.pools.values()])
            counts = weighted_least_connections(busy, weights, len(sent))
            which = self._rng.permutation(np.repeat(np.arange(len(labels)), counts))
        for n, label in enumerate(labels):
            part = Requests(sent.data[which == n]) if len(sent) else sent
            self.pools[label].advance(t0, t1, _Given(part))
        self._merge()

    def _merge(self) -> None:
        """Append what the pools recorded this tick to the tier's record (their counters, summed)."""
        rec, fresh = self._record, []
        for label, pool in self.pools.items():
            got = pool.record
            seen = self._seen[label]
            rec.ttft_at += got.ttft_at[seen:]
            rec.ttft += got.ttft[seen:]
            rec.ttft_origin += got.ttft_origin[seen:]
            self._seen[label] = len(got.ttft)
            rec.e2e.append(got.e2e[-1])
            fresh.append(got.timeline[-1])
        rec.timeline.append((fresh[0][0], *(sum(row[k] for row in fresh) for k in range(1, 5))))  # type: ignore[arg-type]
        records = [pool.record for pool in self.pools.values()]
        for name in ("arrivals", "retries", "abandoned", "refused", "rejected_too_long", "preemptions"):
            setattr(rec, name, sum(getattr(r, name) for r in records))

    # ---- the record ----------------------------------------------------------------------------------------
    @property
    def record(self) -> PoolRecord:
        return self._record

    @record.setter
    def record(self, value: PoolRecord) -> None:
        """A new record (the report opens): every pool starts one too, judging from the same moment."""
        self._record = value
        for pool in self.pools.values():
            pool.record = PoolRecord(since=value.since)
        self._seen = dict.fromkeys(self.pools, 0)

    # ---- observation -------------------------------------------------------------------------------------
    def ready_count(self, label: str) -> int:
        return len(self.pools[label].ready_ids)

    def awaiting_first_token(self) -> FloatArray:
        return np.concatenate([pool.awaiting_first_token() for pool in self.pools.values()])

    def held(self) -> int:
        return sum(pool.held() for pool in self.pools.values())

    def in_flight_by_instance(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for pool in self.pools.values():
            out.update(pool.in_flight_by_instance())
        return out

    def signals(self) -> Signals:
        """The tier's /metrics over every pool: sums of counts and rates, TTFT quantiles from the pools'
        windows together, KV usage weighted by each pool's KV capacity, the prefix hit rate by prompt tokens."""
        parts = [(pool, pool.signals()) for pool in self.pools.values()]
        serving = [(pool, s) for pool, s in parts if s.requests_running is not None]
        window = LatencyHistogram()
        for pool, _ in parts:
            window = window.plus(pool.ttft_window())
        q = window.quantiles((0.5, 0.95, 0.99))

        def total(name: str, among: list[tuple[ServingPool, Signals]]) -> float | None:
            values = [getattr(s, name) for _, s in among if getattr(s, name) is not None]
            return float(sum(values)) if values else None

        kv = None
        room = [(len(p.ready_ids) * p.profile.kv_capacity_tokens, s.kv_cache_usage) for p, s in serving]
        if room and all(k is not None for _, k in room):
            kv = sum(n * (k or 0.0) for n, k in room) / max(sum(n for n, _ in room), 1)
        prompt = total("prompt_tokens_rate", serving)
        cached = sum((s.prefix_cache_hit_rate or 0.0) * (s.prompt_tokens_rate or 0.0) for _, s in serving)
        return Signals(
            ttft_p50_s=q[0] if q else None,
            ttft_p95_s=q[1] if q else None,
            ttft_p99_s=q[2] if q else None,
            requests_waiting=total("requests_waiting", serving),
            requests_running=total("requests_running", serving),
            kv_cache_usage=kv,
            arrivals=total("arrivals", parts),
            request_rate=total("request_rate", parts),
            finish_rate=total("finish_rate", serving),
            prompt_tokens_rate=prompt,
            generation_tokens_rate=total("generation_tokens_rate", serving),
            prefix_cache_hit_rate=cached / prompt if prompt else None,
        )
