"""The simulated cloud: offers at seed prices, capacity limits, provisioning delay on the injected clock,
spot interruptions with a notice, per-second billing, and faults on demand.

It is the default provider (embedded run, tests, simulator). With ``options.state_path`` its state lives
in a JSON file, written atomically after every change, so it outlives a daemon that is killed: like a
real cloud, an instance created before a crash is still there (and still billing) after it.
"""

from __future__ import annotations

import builtins
import hashlib
import heapq
import json
import os
import random
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from clocks import Clock
from providers.base import (
    BootstrapForm,
    Capacity,
    GpuRequest,
    InstanceStatus,
    LaunchSpec,
    ListFilter,
    LocalState,
    NoticeDelivery,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from providers.errors import InstanceNotFound, InsufficientCapacity, InvalidRequest, ProviderError
from providers.registry import ProviderConfig
from providers.status import map_status
from sizing.gpus import GPUS, UnknownGpu, normalize_gpu
from sizing.server import ServerDescription

DEFAULT_REGIONS = ("sim-east", "sim-west")
_STATUS = {s.value: s for s in InstanceStatus if s is not InstanceStatus.UNKNOWN}


@dataclass
class _SimInstance:
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
    ready_at: float
    status: str = "pending"
    ended_at: float | None = None
    notice_at: float | None = None
    preempt_at: float | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SimOptions:
    seed: int = 7
    regions: tuple[str, ...] = DEFAULT_REGIONS
    provision_delay_min: float = 120.0  # seconds from create to serving (boot + image + weights)
    provision_delay_max: float = 300.0
    capacity_per_offer: int = 10_000  # machines an offer can hand out at once
    spot_interruptions_per_hour: float = 0.0  # per spot instance
    interruption_notice: float = 120.0
    state_path: str | None = None
    create_delay: float = 0.0  # seconds `create` takes to answer after the instance exists (lost answers)

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> SimOptions:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"simulated provider: unknown options {sorted(unknown)}; known: {sorted(known)}")
        values = dict(options)
        if "regions" in values:
            values["regions"] = tuple(values["regions"])
        return cls(**values)


DrawsFor = Callable[[str], random.Random]  # instance key -> the random stream its delays are drawn from
AddressOf = Callable[[str], "str | None"]  # provider id -> the address an instance answers on


class SimulatedCloud:
    """A provider that behaves like a GPU cloud, driven by the injected clock.

    ``draws`` replaces the default per-key random stream (a run that needs the same delays whatever keys
    the controller picks draws them in creation order); ``address_of`` gives instances an address (by
    default nothing listens, so they have none).
    """

    # Nothing boots: a simulated machine serves once it is running. Notices show on get/list.
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.NONE,
        running_means_ready=True,
        spot=True,
        interruption_notices=NoticeDelivery.POLL,
        list_filter=ListFilter.NAME_PREFIX,
        # A simulated cloud outlives the daemon, like a real one: its state file lives in the data dir.
        local_state=LocalState("state_path", "simulated-cloud.json", "simulated-cloud-{name}.json"),
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> None:
        return None  # no server to start

    def __init__(
        self,
        config: ProviderConfig | None = None,
        clock: Clock | None = None,
        *,
        draws: DrawsFor | None = None,
        address_of: AddressOf | None = None,
        **overrides: Any,
    ):
        if clock is None:
            raise ValueError("SimulatedCloud needs a clock")
        self._draws_for = draws
        self._address_of = address_of
        self.name = config.name if config else "simulated"
        options = dict(config.options) if config else {}
        options.update(overrides)
        self.options = SimOptions.from_mapping(options)
        self.clock = clock
        self.calls: Counter[str] = Counter()
        self._instances: dict[str, _SimInstance] = {}  # live (not yet ended)
        self._ended: dict[str, _SimInstance] = {}
        self._by_key: dict[str, str] = {}
        self._capacity: dict[str, int] = {}  # offer_id -> limit override
        self._faults: list[tuple[str, ProviderError]] = []  # (method, error) raised in order
        self._billed_ended = 0.0
        self._next = 0
        self._pool_counts: Counter[str] = Counter()  # live machines per pool (capacity limits)
        self._due: list[tuple[float, str]] = []  # heap of (when, provider_id): boots end, preemptions land
        self._load()

    # ---- test and simulator controls -------------------------------------------------------------
    def fail_next(self, method: str, error: ProviderError, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` raise ``error`` (Karpenter's NextCreateErr)."""
        self._faults.extend([(method, error)] * times)

    def set_capacity(
        self, gpu: str, limit: int, *, capacity: Capacity | None = None, region: str | None = None
    ) -> None:
        """Cap how many machines of ``gpu`` (optionally one capacity kind / region) can run at once."""
        canonical = normalize_gpu(gpu)
        for cap in (Capacity.ON_DEMAND, Capacity.SPOT) if capacity is None else (capacity,):
            for reg in self.options.regions if region is None else (region,):
                self._capacity[self._pool(canonical, reg, cap)] = limit
        self._save()

    def interrupt(self, provider_id: str, *, notice: float | None = None) -> None:
        """Preempt an instance now (``notice`` None) or after ``notice`` seconds with a warning first."""
        inst = self._instances.get(provider_id)
        if inst is None:
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        now = self.clock.now()
        inst.notice_at = now
        inst.preempt_at = now + (notice or 0.0)
        heapq.heappush(self._due, (inst.preempt_at, provider_id))
        self._save()

    def set_raw_status(self, provider_id: str, raw: str) -> None:
        """Make the cloud report a status string of its own (tests of status mapping)."""
        self._instances[provider_id].status = raw

    def add_foreign_instance(self, name: str) -> str:
        """An instance somebody else started in the same account (not ours: no key)."""
        offer: Offer = self._all_offers(GpuRequest(gpu="L40S-48GB"))[0]
        now = self.clock.now()
        pid = self._new_id()
        self._track(
            _SimInstance(pid, name, "", offer.offer_id, offer.gpu, 1, offer.region, "on-demand", 0.72, now, now)
        )
        self._save()
        return pid

    def running_by_tier(self) -> dict[str, int]:
        """Instances up and serving, per tier (what a load model needs to know)."""
        self._advance()
        counts: dict[str, int] = {}
        for inst in self._instances.values():
            if inst.status == "running" and inst.tier:
                counts[inst.tier] = counts.get(inst.tier, 0) + 1
        return counts

    def billed(self) -> float:
        """Dollars billed so far, per second, for every instance ever created."""
        now = self.clock.now()
        live = sum(self._cost(i, now) for i in self._instances.values())
        return self._billed_ended + live

    def billed_by_tier(self, t0: float, t1: float) -> dict[str, tuple[float, float]]:
        """Per tier, (dollars, instance-seconds) billed within [t0, t1]: every instance from create to
        delete (or preemption), provisioning included, clipped to the window."""
        out: dict[str, tuple[float, float]] = {}
        now = self.clock.now()
        for inst in (*self._instances.values(), *self._ended.values()):
            if not inst.tier:
                continue
            end = inst.ended_at if inst.ended_at is not None else now
            seconds = max(0.0, min(end, t1) - max(inst.created_at, t0))
            dollars, total = out.get(inst.tier, (0.0, 0.0))
            out[inst.tier] = (dollars + seconds * inst.price_per_hour / 3600.0, total + seconds)
        return out

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> list[Offer]:
        self._call("offers")
        return self._all_offers(want)

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        self._call("create")
        self._advance()
        existing = self._by_key.get(spec.key)
        if existing is not None:
            inst = self._instances.get(existing) or self._ended[existing]
            return self._view(inst)
        offer = spec.offer
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        try:
            gpu = normalize_gpu(offer.gpu)
        except UnknownGpu as exc:
            raise InvalidRequest(str(exc), provider=self.name) from None
        if offer.region not in self.options.regions:
            raise InvalidRequest(
                f"unknown region {offer.region!r}; regions: {', '.join(self.options.regions)}", provider=self.name
            )
        price = offer.price(spec.capacity)
        if price is None:
            raise InvalidRequest(f"offer {offer.offer_id} is not sold as {spec.capacity.value}", provider=self.name)
        offer_id = self._offer_id(gpu, offer.gpu_count, offer.region, spec.capacity)
        pool = self._pool(gpu, offer.region, spec.capacity)
        if self._in_use(pool) >= self._limit(pool):
            raise InsufficientCapacity(f"no {gpu} {spec.capacity.value} capacity in {offer.region}", provider=self.name)
        now = self.clock.now()
        rng = self._rng(spec.key)
        lo, hi = self.options.provision_delay_min, self.options.provision_delay_max
        inst = _SimInstance(
            provider_id=self._new_id(),
            key=spec.key,
            tier=spec.tier,
            offer_id=offer_id,
            gpu=gpu,
            gpu_count=offer.gpu_count,
            region=offer.region,
            capacity=spec.capacity.value,
            price_per_hour=price,
            created_at=now,
            ready_at=now + rng.uniform(lo, hi),
            tags=dict(spec.tags),
        )
        rate = self.options.spot_interruptions_per_hour
        if spec.capacity is Capacity.SPOT and rate > 0:
            inst.preempt_at = now + rng.expovariate(rate / 3600.0)
            inst.notice_at = inst.preempt_at - self.options.interruption_notice
        self._track(inst)
        self._by_key[spec.key] = inst.provider_id
        self._save()
        if self.options.create_delay:  # the machine exists; the answer is still on its way
            await self.clock.sleep(self.options.create_delay)
        return self._view(inst)

    async def get(self, provider_id: str) -> ProviderInstance:
        self._call("get")
        self._advance()
        inst = self._instances.get(provider_id) or self._ended.get(provider_id)
        if inst is None:
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        return self._view(inst)

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        self._call("list")
        self._advance()
        return [self._view(i) for i in self._instances.values() if i.key.startswith(key_prefix) and i.tier]

    async def delete(self, provider_id: str) -> None:
        self._call("delete")
        inst = self._instances.get(provider_id)
        if inst is None:
            return  # already gone (or never existed): success, per the protocol
        self._untrack(inst)
        self._end(inst, "terminated")
        self._save()

    async def aclose(self) -> None:
        self._save()

    # ---- internals -------------------------------------------------------------------------------
    def _call(self, method: str) -> None:
        self.calls[method] += 1
        for i, (m, error) in enumerate(self._faults):
            if m == method:
                del self._faults[i]
                raise error

    def _track(self, inst: _SimInstance) -> None:
        """A live instance: counted in its pool, its boot end and preemption on the timeline."""
        self._instances[inst.provider_id] = inst
        self._pool_counts[self._pool(inst.gpu, inst.region, inst.capacity)] += 1
        if inst.status == "pending":
            heapq.heappush(self._due, (inst.ready_at, inst.provider_id))
        if inst.preempt_at is not None:
            heapq.heappush(self._due, (inst.preempt_at, inst.provider_id))

    def _advance(self) -> None:
        """Apply what time has done since the last call: boots finish, preemptions land. Only the due
        entries of the timeline are visited, so a call costs O(changes), not O(fleet)."""
        now = self.clock.now()
        changed = False
        while self._due and self._due[0][0] <= now:
            _, pid = heapq.heappop(self._due)
            inst = self._instances.get(pid)
            if inst is None:
                continue  # deleted before its time came
            if inst.preempt_at is not None and now >= inst.preempt_at:
                self._untrack(inst)
                self._end(inst, "preempted")
                changed = True
            elif inst.status == "pending" and now >= inst.ready_at:
                inst.status = "running"
                changed = True
        if changed:
            self._save()

    def _untrack(self, inst: _SimInstance) -> None:
        del self._instances[inst.provider_id]
        self._pool_counts[self._pool(inst.gpu, inst.region, inst.capacity)] -= 1

    def _end(self, inst: _SimInstance, status: str) -> None:
        now = self.clock.now() if inst.preempt_at is None or status != "preempted" else inst.preempt_at
        inst.status, inst.ended_at = status, now
        self._billed_ended += self._cost(inst, now)
        self._ended[inst.provider_id] = inst

    @staticmethod
    def _cost(inst: _SimInstance, now: float) -> float:
        end = inst.ended_at if inst.ended_at is not None else now
        return max(0.0, end - inst.created_at) * inst.price_per_hour / 3600.0

    def _view(self, inst: _SimInstance) -> ProviderInstance:
        now = self.clock.now()
        notice = inst.notice_at if inst.notice_at is not None and now >= inst.notice_at else None
        status = map_status(inst.status, _STATUS)
        return ProviderInstance(
            provider=self.name,
            provider_id=inst.provider_id,
            key=inst.key if inst.tier else None,
            status=status,
            raw_status=inst.status,
            gpu=inst.gpu,
            gpu_count=inst.gpu_count,
            region=inst.region,
            capacity=Capacity(inst.capacity),
            price_per_hour=inst.price_per_hour,
            address=self._address_of(inst.provider_id) if self._address_of else None,
            created_at=inst.created_at,
            interruption_notice_at=notice,
        )

    def _all_offers(self, want: GpuRequest) -> builtins.list[Offer]:
        try:
            gpu = normalize_gpu(want.gpu)
        except UnknownGpu:
            return []
        info = GPUS[gpu]
        regions = [r for r in self.options.regions if not want.regions or r in want.regions]
        offers = []
        for region in regions:
            spot = info.spot_per_hour * want.count if info.spot_per_hour is not None else None
            for cap in (Capacity.ON_DEMAND, Capacity.SPOT):
                if want.capacity not in (None, cap) or (cap is Capacity.SPOT and spot is None):
                    continue
                offer_id = self._offer_id(gpu, want.count, region, cap)
                pool = self._pool(gpu, region, cap)
                free = max(0, self._limit(pool) - self._in_use(pool))
                offers.append(
                    Offer(
                        provider=self.name,
                        offer_id=offer_id,
                        gpu=gpu,
                        gpu_count=want.count,
                        region=region,
                        on_demand_per_hour=round(info.on_demand_per_hour * want.count, 4)
                        if cap is Capacity.ON_DEMAND
                        else None,
                        spot_per_hour=spot if cap is Capacity.SPOT else None,
                        available=free > 0,
                        available_count=free,
                    )
                )
        return offers

    @staticmethod
    def _offer_id(gpu: str, count: int, region: str, capacity: Capacity) -> str:
        return f"{gpu}x{count}/{region}/{capacity.value}"

    @staticmethod
    def _pool(gpu: str, region: str, capacity: Capacity | str) -> str:
        """Machines of one GPU type, region and capacity kind share one capacity limit."""
        return f"{gpu}/{region}/{Capacity(capacity).value}"

    def _limit(self, pool: str) -> int:
        return self._capacity.get(pool, self.options.capacity_per_offer)

    def _in_use(self, pool: str) -> int:
        return self._pool_counts[pool]

    def _new_id(self) -> str:
        self._next += 1
        return f"sim-{self._next:06d}"

    def _rng(self, key: str) -> random.Random:
        if self._draws_for is not None:
            return self._draws_for(key)
        digest = hashlib.sha256(f"{self.options.seed}:{key}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    # ---- persistence (optional) ------------------------------------------------------------------
    def _save(self) -> None:
        path = self.options.state_path
        if not path:
            return
        state = {
            "next": self._next,
            "billed_ended": self._billed_ended,
            "capacity": self._capacity,
            "instances": [asdict(i) for i in self._instances.values()],
            "ended": [asdict(i) for i in self._ended.values()],
        }
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".sim-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    def _load(self) -> None:
        path = self.options.state_path
        if not path or not Path(path).exists():
            return
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        self._next = int(state["next"])
        self._billed_ended = float(state["billed_ended"])
        self._capacity = {str(k): int(v) for k, v in state["capacity"].items()}
        for raw in state["instances"]:
            inst = _SimInstance(**raw)
            self._track(inst)
            self._by_key[inst.key] = inst.provider_id
        for raw in state["ended"]:
            inst = _SimInstance(**raw)
            self._ended[inst.provider_id] = inst
            self._by_key.setdefault(inst.key, inst.provider_id)
