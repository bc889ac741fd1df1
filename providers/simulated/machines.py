"""The simulated cloud's books: every machine it ever made, which are live, how many run in each capacity
pool, what comes due when (boots finishing, preemptions landing), what was billed, and the state file
that lets all of it outlive a daemon that is killed."""

from __future__ import annotations

import heapq
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scalectl.providers.base import Capacity


@dataclass
class SimInstance:
    provider_id: str
    key: str
    tier: str
    offer_id: str
    gpu: str
    gpu_count: int
    region: str
    capacity: str
    price_per_hour: float
    created_at: float
    ready_at: float  # the machine is up: the cloud reports it running
    status: str = "pending"
    ended_at: float | None = None
    notice_at: float | None = None
    preempt_at: float | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # [stopped at, started again at or None]: stretches billed for the disk only, not the GPU
    stops: list[list[float | None]] = field(default_factory=list)
    storage_per_hour: float = 0.0

    @property
    def holds_gpu(self) -> bool:
        return self.status != "stopped"

    serving_at: float | None = None  # its server answers (None: once running; a boot drawn in parts sets it)


def pool_of(gpu: str, region: str, capacity: Capacity | str) -> str:
    """Machines of one GPU type, region and capacity kind share one capacity limit."""
    return f"{gpu}/{region}/{Capacity(capacity).value}"


def cost_of(inst: SimInstance, now: float) -> float:
    """Dollars billed per second from create to end (or now): the GPU price, but the disk's while stopped."""
    end = inst.ended_at if inst.ended_at is not None else now
    return billed_within(inst, inst.created_at, end, now)[0]


def billed_within(inst: SimInstance, t0: float, t1: float, now: float) -> tuple[float, float]:
    """(dollars, GPU-seconds) the machine billed within [t0, t1]: GPU seconds at its price, stopped
    seconds at its disk's."""
    lo, hi, stopped = _stopped_within(inst, t0, t1, now)
    if hi <= lo:
        return 0.0, 0.0
    gpu_seconds = (hi - lo) - stopped
    return (gpu_seconds * inst.price_per_hour + stopped * inst.storage_per_hour) / 3600.0, gpu_seconds


def _stopped_within(inst: SimInstance, t0: float, t1: float, now: float) -> tuple[float, float, float]:
    """The machine's billed span clipped to [t0, t1] (lo, hi) and its stopped seconds within it."""
    end = inst.ended_at if inst.ended_at is not None else now
    lo, hi = max(inst.created_at, t0), min(end, t1)
    stopped = 0.0
    for began, until in inst.stops if hi > lo else ():
        assert began is not None
        stopped += max(0.0, min(hi, until if until is not None else end) - max(lo, began))
    return lo, hi, stopped


class SimFleet:
    """Live and ended machines, pools and the timeline. ``advance`` costs O(changes), not O(fleet)."""

    def __init__(self, account: str = "sim") -> None:
        self.account = account  # ids start with it: two simulated accounts in one run never share an id
        self.live: dict[str, SimInstance] = {}  # not yet ended
        self.ended: dict[str, SimInstance] = {}
        self.by_key: dict[str, str] = {}
        self.limits: dict[str, int] = {}  # pool -> limit override
        self.billed_ended = 0.0
        self._next = 0
        self._pool_counts: Counter[str] = Counter()  # live machines per pool
        self._due: list[tuple[float, str]] = []  # heap of (when, provider_id): boots end, preemptions land

    def new_id(self) -> str:
        self._next += 1
        return f"{self.account}-{self._next:06d}"

    def find(self, provider_id: str) -> SimInstance | None:
        return self.live.get(provider_id) or self.ended.get(provider_id)

    def in_use(self, pool: str) -> int:
        return self._pool_counts[pool]

    def track(self, inst: SimInstance) -> None:
        """A live machine: counted in its pool (unless stopped), its boot end and preemption on the timeline."""
        self.live[inst.provider_id] = inst
        if inst.holds_gpu:
            self._pool_counts[pool_of(inst.gpu, inst.region, inst.capacity)] += 1
        if inst.status == "pending":
            heapq.heappush(self._due, (inst.ready_at, inst.provider_id))
        if inst.preempt_at is not None:
            heapq.heappush(self._due, (inst.preempt_at, inst.provider_id))

    def schedule(self, when: float, provider_id: str) -> None:
        heapq.heappush(self._due, (when, provider_id))

    def park(self, inst: SimInstance, now: float) -> None:
        """Stop a live machine: its GPU goes back to the pool, its disk stays (and bills)."""
        self._pool_counts[pool_of(inst.gpu, inst.region, inst.capacity)] -= 1
        inst.status = "stopped"
        inst.stops.append([now, None])

    def unpark(self, inst: SimInstance, now: float, ready_at: float) -> None:
        """Start a stopped machine: it takes a GPU from its pool again and runs at ``ready_at``."""
        self._pool_counts[pool_of(inst.gpu, inst.region, inst.capacity)] += 1
        inst.stops[-1][1] = now
        inst.status, inst.ready_at = "pending", ready_at
        heapq.heappush(self._due, (ready_at, inst.provider_id))

    def end(self, inst: SimInstance, status: str, now: float) -> None:
        del self.live[inst.provider_id]
        if inst.holds_gpu:
            self._pool_counts[pool_of(inst.gpu, inst.region, inst.capacity)] -= 1
        at = inst.preempt_at if status == "preempted" and inst.preempt_at is not None else now
        inst.status, inst.ended_at = status, at
        self.billed_ended += cost_of(inst, at)
        self.ended[inst.provider_id] = inst

    def advance(self, now: float) -> bool:
        """Apply what time has done: boots finish, preemptions land. True when anything changed."""
        changed = False
        while self._due and self._due[0][0] <= now:
            _, pid = heapq.heappop(self._due)
            inst = self.live.get(pid)
            if inst is None:
                continue  # deleted before its time came
            if inst.preempt_at is not None and now >= inst.preempt_at:
                self.end(inst, "preempted", now)
                changed = True
            elif inst.status == "pending" and now >= inst.ready_at:
                inst.status = "running"
                changed = True
        return changed

    def billed(self, now: float) -> float:
        return self.billed_ended + sum(cost_of(i, now) for i in self.live.values())

    def billed_by_tier(self, t0: float, t1: float, now: float) -> dict[str, tuple[float, float]]:
        """Per tier, (dollars, GPU-seconds) billed within [t0, t1]: every machine from create to
        delete (or preemption), provisioning included, clipped to the window."""
        out: dict[str, tuple[float, float]] = {}
        for inst in (*self.live.values(), *self.ended.values()):
            if not inst.tier:
                continue
            billed, seconds = billed_within(inst, t0, t1, now)
            dollars, total = out.get(inst.tier, (0.0, 0.0))
            out[inst.tier] = (dollars + billed, total + seconds)
        return out

    def storage_by_tier(self, t0: float, t1: float, now: float) -> dict[str, float]:
        """Per tier, the dollars stopped machines billed for their disks within [t0, t1] (part of
        ``billed_by_tier``'s)."""
        out: dict[str, float] = {}
        for inst in (*self.live.values(), *self.ended.values()):
            if inst.tier and inst.stops:
                stopped = _stopped_within(inst, t0, t1, now)[2]
                out[inst.tier] = out.get(inst.tier, 0.0) + stopped * inst.storage_per_hour / 3600.0
        return out

    # ---- the state file ------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Written atomically (temp file, fsync, rename): a kill never leaves half a file."""
        state = {
            "next": self._next,
            "billed_ended": self.billed_ended,
            "capacity": self.limits,
            "instances": [asdict(i) for i in self.live.values()],
            "ended": [asdict(i) for i in self.ended.values()],
        }
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".sim-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    def load(self, path: str) -> None:
        if not Path(path).exists():
            return
        state: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        self._next = int(state["next"])
        self.billed_ended = float(state["billed_ended"])
        self.limits = {str(k): int(v) for k, v in state["capacity"].items()}
        self._restore(SimInstance(**raw) for raw in state["instances"])
        for raw in state["ended"]:
            inst = SimInstance(**raw)
            self.ended[inst.provider_id] = inst
            self.by_key.setdefault(inst.key, inst.provider_id)

    def _restore(self, live: Iterable[SimInstance]) -> None:
        for inst in live:
            self.track(inst)
            self.by_key[inst.key] = inst.provider_id
