"""The simulated cloud as a provider: the Provider protocol over ``SimFleet``, seed-price offers, and the
controls tests and the simulator use (faults, capacity limits, interruptions)."""

from __future__ import annotations

import builtins
import hashlib
import random
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from scalectl.clocks import Clock
from scalectl.providers.base import (
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
from scalectl.providers.errors import InstanceNotFound, InsufficientCapacity, InvalidRequest, ProviderError
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated.machines import SimFleet, SimInstance, pool_of
from scalectl.providers.simulated.offers import offer_id_of, seed_offers
from scalectl.providers.simulated.options import SimOptions
from scalectl.providers.status import map_status
from scalectl.providers.stop_start import refuse
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu
from scalectl.sizing.server import ServerDescription

_STATUS = {s.value: s for s in InstanceStatus if s is not InstanceStatus.UNKNOWN}
_CAPACITY = {c.value: c for c in Capacity}  # a dict lookup: the enum's call costs more, per instance listed

DrawsFor = Callable[[str], random.Random]  # instance key -> the random stream its delays are drawn from
# (launch, the instance's random stream) -> seconds from create until (the machine is up, its server answers)
BootFor = Callable[[LaunchSpec, random.Random], tuple[float, float]]
# (the stopped machine, its random stream) -> seconds from its start until (running again, its server answers)
ResumeFor = Callable[[SimInstance, random.Random], tuple[float, float]]
AddressOf = Callable[[str], "str | None"]  # provider id -> the address an instance answers on


class SimulatedCloud:
    """A provider that behaves like a GPU cloud, driven by the injected clock.

    ``draws`` replaces the default per-key random stream (a run that needs the same delays whatever keys
    the controller picks draws them in creation order); ``address_of`` gives instances an address (by
    default nothing listens, so they have none); ``boot`` replaces the uniform provisioning delay with a
    boot in two phases, machine up then server answering (``serving`` tells which instances answer).
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
        # Stop and start as EC2 and RunPod do them: on-demand machines only, the disk billed while stopped,
        # a start that fails when the GPU went to someone else (SimOptions: resume delay, failure rate).
        stop_start=True,
        billed_while_stopped="the machine's disk (storage_per_hour), not the GPU",
        resume_may_fail_no_capacity=True,
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
        boot: BootFor | None = None,
        resume: ResumeFor | None = None,
        **overrides: Any,
    ):
        if clock is None:
            raise ValueError("SimulatedCloud needs a clock")
        self._draws_for = draws
        self._boot = boot
        self._resume = resume
        self._address_of = address_of
        self.name = config.name if config else "simulated"
        options = dict(config.options) if config else {}
        options.update(overrides)
        self.options = SimOptions.from_mapping(options)
        self.clock = clock
        self.calls: Counter[str] = Counter()
        self.fleet = SimFleet(self.name)
        self._faults: list[tuple[str, ProviderError]] = []  # (method, error) raised in order
        # provider id -> (machine, status, notice, address, its view): a listing of 10,000 machines built
        # 10,000 views a tick, most of them as they were the tick before
        self._views: dict[str, tuple[SimInstance, str, float | None, str | None, ProviderInstance]] = {}
        if self.options.state_path:
            self.fleet.load(self.options.state_path)

    @property
    def storage_per_hour(self) -> float:
        """$ an hour a stopped machine bills (its disk): read by the reconciler's ledger."""
        return self.options.storage_per_hour

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
                self.fleet.limits[pool_of(canonical, reg, cap)] = limit
        self._save()

    def interrupt(self, provider_id: str, *, notice: float | None = None) -> None:
        """Preempt an instance now (``notice`` None) or after ``notice`` seconds with a warning first."""
        inst = self.fleet.live.get(provider_id)
        if inst is None:
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        now = self.clock.now()
        inst.notice_at = now
        inst.preempt_at = now + (notice or 0.0)
        self.fleet.schedule(inst.preempt_at, provider_id)
        self._save()

    def set_raw_status(self, provider_id: str, raw: str) -> None:
        """Make the cloud report a status string of its own (tests of status mapping)."""
        self.fleet.live[provider_id].status = raw

    def add_foreign_instance(self, name: str) -> str:
        """An instance somebody else started in the same account (not ours: no key)."""
        offer: Offer = self._offers(GpuRequest(gpu="L40S-48GB"))[0]
        now = self.clock.now()
        pid = self.fleet.new_id()
        self.fleet.track(
            SimInstance(pid, name, "", offer.offer_id, offer.gpu, 1, offer.region, "on-demand", 0.72, now, now)
        )
        self._save()
        return pid

    def serving(self, provider_id: str) -> bool:
        """Whether the instance's server answers: running, and past its drawn serving time if it has one."""
        self._advance()
        inst = self.fleet.live.get(provider_id)
        if inst is None or inst.status != "running":
            return False
        return inst.serving_at is None or self.clock.now() >= inst.serving_at

    def running_by_tier(self) -> dict[str, int]:
        """Instances up and serving, per tier (what a load model needs to know)."""
        self._advance()
        counts: dict[str, int] = {}
        for inst in self.fleet.live.values():
            if inst.status == "running" and inst.tier:
                counts[inst.tier] = counts.get(inst.tier, 0) + 1
        return counts

    def billed(self) -> float:
        """Dollars billed so far, per second, for every instance ever created."""
        return self.fleet.billed(self.clock.now())

    def storage_by_tier(self, t0: float, t1: float) -> dict[str, float]:
        """Per tier, dollars stopped machines' disks billed within [t0, t1] (inside ``billed_by_tier``)."""
        return self.fleet.storage_by_tier(t0, t1, self.clock.now())

    def billed_by_tier(self, t0: float, t1: float) -> dict[str, tuple[float, float]]:
        """Per tier, (dollars, instance-seconds) billed within [t0, t1], provisioning included."""
        return self.fleet.billed_by_tier(t0, t1, self.clock.now())

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> list[Offer]:
        self._call("offers")
        return self._offers(want)

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        self._call("create")
        self._advance()
        existing = self.fleet.by_key.get(spec.key)
        if existing is not None:
            made = self.fleet.find(existing)
            assert made is not None
            return self._view(made)
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
        pool = pool_of(gpu, offer.region, spec.capacity)
        if self.fleet.in_use(pool) >= self._limit(pool):
            raise InsufficientCapacity(f"no {gpu} {spec.capacity.value} capacity in {offer.region}", provider=self.name)
        inst = self._new_instance(spec, gpu, price)
        self.fleet.track(inst)
        self.fleet.by_key[spec.key] = inst.provider_id
        self._save()
        if self.options.create_delay:  # the machine exists; the answer is still on its way
            await self.clock.sleep(self.options.create_delay)
        return self._view(inst)

    async def get(self, provider_id: str) -> ProviderInstance:
        self._call("get")
        self._advance()
        inst = self.fleet.find(provider_id)
        if inst is None:
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        return self._view(inst)

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        self._call("list")
        self._advance()
        live = self.fleet.live
        if len(self._views) > 2 * len(live):  # views of machines gone since
            self._views = {k: v for k, v in self._views.items() if k in live}
        return [self._view(i) for i in live.values() if i.key.startswith(key_prefix) and i.tier]

    async def delete(self, provider_id: str) -> None:
        self._call("delete")
        inst = self.fleet.live.get(provider_id)
        if inst is None:
            return  # already gone (or never existed): success, per the protocol
        self.fleet.end(inst, "terminated", self.clock.now())
        self._save()

    async def stop(self, provider_id: str) -> None:
        self._call("stop")
        self._advance()
        inst = self._stoppable(provider_id, "stop")
        if inst.status != "stopped":
            self.fleet.park(inst, self.clock.now())
            self._save()

    async def start(self, provider_id: str) -> None:
        self._call("start")
        self._advance()
        inst = self._stoppable(provider_id, "start")
        if inst.status != "stopped":
            return  # running or on its way: success
        pool = pool_of(inst.gpu, inst.region, inst.capacity)
        rng = self._rng(f"{inst.key}:resume:{len(inst.stops)}")
        taken = rng.random() < self.options.resume_failure_rate
        if taken or self.fleet.in_use(pool) >= self._limit(pool):
            raise InsufficientCapacity(
                f"{inst.provider_id}: no {inst.gpu} free in {inst.region} to start it on", provider=self.name
            )
        now = self.clock.now()
        if self._resume is not None:  # drawn in parts (the simulator: the boot model's cached path)
            up, serving = self._resume(inst, rng)
        else:
            up = serving = rng.uniform(self.options.resume_delay_min, self.options.resume_delay_max)
        inst.serving_at = now + max(up, serving)
        self.fleet.unpark(inst, now, now + up)
        self._save()

    async def aclose(self) -> None:
        self._save()

    def _stoppable(self, provider_id: str, operation: str) -> SimInstance:
        inst = self.fleet.live.get(provider_id)
        if inst is None:
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        if inst.capacity == Capacity.SPOT.value:
            raise refuse(operation, provider=self.name, why=f"{provider_id} is a spot machine")
        return inst

    # ---- internals -------------------------------------------------------------------------------
    def _call(self, method: str) -> None:
        self.calls[method] += 1
        for i, (m, error) in enumerate(self._faults):
            if m == method:
                del self._faults[i]
                raise error

    def _new_instance(self, spec: LaunchSpec, gpu: str, price: float) -> SimInstance:
        """A machine with its boot time (and, on spot, its preemption) drawn from the key's stream."""
        now = self.clock.now()
        rng = self._rng(spec.key)
        offer = spec.offer
        if self._boot is not None:
            up, serving = self._boot(spec, rng)
            ready_at, serving_at = now + up, now + max(up, serving)
        else:
            ready_at = now + rng.uniform(self.options.provision_delay_min, self.options.provision_delay_max)
            serving_at = None
        inst = SimInstance(
            provider_id=self.fleet.new_id(),
            key=spec.key,
            tier=spec.tier,
            offer_id=offer_id_of(gpu, offer.gpu_count, offer.region, spec.capacity),
            gpu=gpu,
            gpu_count=offer.gpu_count,
            region=offer.region,
            capacity=spec.capacity.value,
            price_per_hour=price,
            created_at=now,
            ready_at=ready_at,
            tags=dict(spec.tags),
            storage_per_hour=self.options.storage_per_hour,
            serving_at=serving_at,
        )
        rate = self.options.spot_interruptions_per_hour
        if spec.capacity is Capacity.SPOT and rate > 0:
            inst.preempt_at = now + rng.expovariate(rate / 3600.0)
            inst.notice_at = inst.preempt_at - self.options.interruption_notice
        return inst

    def _advance(self) -> None:
        if self.fleet.advance(self.clock.now()):
            self._save()

    def _view(self, inst: SimInstance) -> ProviderInstance:
        """The provider's answer for ``inst``: the last one while the same machine's status, visible notice
        and address are as they were (nothing else of a machine changes after its create)."""
        now = self.clock.now()
        notice = inst.notice_at if inst.notice_at is not None and now >= inst.notice_at else None
        address = self._address_of(inst.provider_id) if self._address_of else None
        kept = self._views.get(inst.provider_id)
        if kept is not None and kept[0] is inst and kept[1] == inst.status and kept[2:4] == (notice, address):
            return kept[4]
        view = ProviderInstance(
            provider=self.name,
            provider_id=inst.provider_id,
            key=inst.key if inst.tier else None,
            status=_STATUS.get(inst.status) or map_status(inst.status, _STATUS),
            raw_status=inst.status,
            gpu=inst.gpu,
            gpu_count=inst.gpu_count,
            region=inst.region,
            capacity=_CAPACITY.get(inst.capacity) or Capacity(inst.capacity),
            price_per_hour=inst.price_per_hour,
            address=address,
            created_at=inst.created_at,
            interruption_notice_at=notice,
        )
        self._views[inst.provider_id] = (inst, inst.status, notice, address, view)
        return view

    def _offers(self, want: GpuRequest) -> builtins.list[Offer]:
        return seed_offers(
            want,
            self.options,
            provider=self.name,
            free=lambda pool: max(0, self._limit(pool) - self.fleet.in_use(pool)),
        )

    def _limit(self, pool: str) -> int:
        return self.fleet.limits.get(pool, self.options.capacity_per_offer)

    def _rng(self, key: str) -> random.Random:
        if self._draws_for is not None:
            return self._draws_for(key)
        digest = hashlib.sha256(f"{self.options.seed}:{key}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def _save(self) -> None:
        if self.options.state_path:
            self.fleet.save(self.options.state_path)
