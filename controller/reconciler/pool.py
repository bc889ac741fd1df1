"""Warm pools (a tier's ``warm_pool``): stopped machines kept beside the tier, started before anything is
created.

- Scale-in: while the pool holds fewer than ``size`` (stopped members and those on their way), a retiring
  instance that served and runs the tier's current server drains and is then stopped, not deleted
  (``end_state`` stopped: the intent is stored with the drain, before the provider is asked to stop).
- Scale-out: a create the plan wants is replaced by a start of a pool member (the most recently stopped
  first). The row leaves the pool before the start is sent (``provisioning``, ``resumed_at`` now: the
  intent first) and counts toward the tier's size as a booting machine does, serving only once ready.
  A start that is refused (the GPU on the host taken meanwhile) drains the member for deletion and sends
  the create it stood in for in the same tick; one not serving within ``resume_timeout`` is deleted the
  same way (``lifecycle.observe``) and, no longer counted, is replaced by a create in that tick's plan.
- Filling: while the pool (stopped members, and those on their way: draining to a stop, or booting to fill
  it) is short of its size by more than the instances above the tier's floor (which scale-in brings back),
  and the tier plans no create, members are created for it (``fill``). Each is an
  intent stored before the create (``end_state`` stopped marks it: ``Instance.filling``), is never counted
  or routed, boots fully once, and on its first ready drains (nothing to finish) and stops. A scale-out
  takes a ready one at once, before starting a stopped member, and a booting one after.
- ``size: auto``: the caller sizes the pool each tick (``pool_size.auto_size``), within ``max``.
- Never a leak: members of another server (the tier's configuration changed), beyond ``max``, or of a tier
  with no pool any more are deleted, filling or stopped; a member is a live row like any other, so garbage
  collection and adoption treat its machine as they treat a running one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.controller.reconciler.fleet_budget import FleetBudget
from scalectl.controller.reconciler.plan import Create, Drain, Note, Plan, plan_creates
from scalectl.controller.reconciler.pool_size import auto_size
from scalectl.controller.reconciler.tick import Tick
from scalectl.domain.instance import Instance, InstanceState
from scalectl.policies.boot import boot_time
from scalectl.policies.prior import boot_prior
from scalectl.policies.types import PolicyState
from scalectl.providers.base import Capacity, Offer, Provider
from scalectl.providers.errors import InstanceNotFound
from scalectl.providers.stop_start import storage_price
from scalectl.sizing.boot import boot_model, resume_model
from scalectl.sizing.errors import SizingError
from scalectl.sizing.models import resolve_model
from scalectl.tiers.config import TierSpec

S = InstanceState
RESUME_FAILED = "resume-failed"  # event: a start refused (the member is deleted; a create takes its place)
RESUME_TIMEOUT = "resume-timeout"  # event: a started member not serving within resume_timeout
RESUMING = "resuming"  # event: a member's start is about to be sent
TAKEN = "pool-taken"  # event: a member filling the pool became a live instance (a scale-out wanted it)
SIZED = "warm-pool-size"  # event: a ``size: auto`` pool's size changed (with the rule's reason)
UNPLACED = "warm-pool-unplaced"  # note: a member to fill the pool found no offer (or budget) this tick


@dataclass
class PoolPlan:
    """What a tier's pool does this tick, beside the tier's plan."""

    resumes: list[tuple[Instance, Create]] = field(default_factory=list)  # member, the create it replaces
    taken: list[Instance] = field(default_factory=list)  # members filling the pool, taken as live instances
    to_pool: list[Drain] = field(default_factory=list)  # drains that end stopped: scale-in, and filled members
    deletes: list[Drain] = field(default_factory=list)  # members that leave the pool for good
    fill: int = 0  # members to create, to fill the pool
    size: int = 0  # the pool's size this tick (``auto``: sized from the forecast error)


def members(instances: Sequence[Instance]) -> list[Instance]:
    return [i for i in instances if i.pooled]


def resuming(inst: Instance) -> bool:
    """Started from the pool (or stopped and started again) and not serving yet: its boot is a resume."""
    return inst.resumed_at is not None and inst.state in (S.PROVISIONING, S.BOOTSTRAPPING)


_PROGRESS = {S.READY: 0, S.BOOTSTRAPPING: 1, S.PROVISIONING: 2, S.PENDING: 3}


def plan_pool(
    tier: TierSpec | None,
    instances: Sequence[Instance],
    plan: Plan,
    current_hash: str | None,
    can_stop: Callable[[str], bool],
    size: int | None = None,
) -> PoolPlan:
    """Mutates ``plan``: creates a member stands in for, and drains that go to the pool, leave it.
    ``size``: the pool's size this tick (``size: auto`` sized by the caller); None: the configured one."""
    out = PoolPlan()
    pool = tier.warm_pool if tier is not None else None
    kept = sorted(members(instances), key=lambda i: -(i.stopped_at or 0.0))  # most recently stopped first
    filling = sorted((i for i in instances if i.filling), key=lambda i: (_PROGRESS[i.state], i.created_at))
    if pool is None:
        why = "warm pool member of a tier without a warm pool: deleted"
        out.deletes = [Drain(i, why) for i in (*kept, *filling)]
        return out
    out.size = min(pool.most, size if size is not None else (pool.fixed_size or 0))
    old = [i for i in (*kept, *filling) if i.server_hash not in (None, current_hash)]
    out.deletes = [Drain(i, "warm pool member of an older server: deleted") for i in old]
    current = [i for i in kept if i not in old]
    filling = [i for i in filling if i not in old]
    out.deletes += [Drain(i, f"warm pool beyond its max ({pool.most}): deleted") for i in current[pool.most :]]
    current = current[: pool.most]
    spare = max(0, pool.most - len(current))  # fills in flight beyond the max are deleted, the least advanced first
    out.deletes += [Drain(i, f"warm pool beyond its max ({pool.most}): deleted") for i in filling[spare:]]
    filling = filling[:spare]
    _stand_in(out, plan, current, filling, can_stop)
    on_the_way = sum(1 for i in instances if i.state is S.DRAINING and i.end_state is S.STOPPED)
    filling = [i for i in filling if i not in out.taken]
    # a filled member has booted once (its disk holds everything a start needs): it stops into the pool
    out.to_pool = [Drain(i, "booted once to fill the warm pool") for i in filling if i.state is S.READY]
    held = len(current) - len(out.resumes) + on_the_way + len(filling)
    room = out.size - held
    assert tier is not None
    staying = sum(1 for i in instances if i.counted) - len(plan.drains)
    returnable = max(0, staying - max(tier.min, getattr(tier.policy, "floor", 0)))
    drains = []
    for drain in plan.drains:
        if room > 0 and _poolable(drain.instance, current_hash, can_stop):
            out.to_pool.append(drain)
            room -= 1
        else:
            drains.append(drain)
    plan.drains = drains
    # Fill by creating only while the tier has what it wants (a create, start or take planned: the tier's
    # first), and only what scale-in will not bring back: instances above the floor return to the pool when
    # the tier scales in, for nothing, where a created member costs a whole cold boot at the GPU's price.
    if pool.fill and room > returnable and not (plan.creates or plan.rebalances or out.resumes or out.taken):
        out.fill = room - returnable
    return out


def _stand_in(
    out: PoolPlan, plan: Plan, current: list[Instance], filling: list[Instance], can_stop: Callable[[str], bool]
) -> None:
    """A create the tier wants is served from the pool first: a filled member already serving-ready, then a
    stopped member (a start), then one still booting to fill the pool (the furthest along)."""
    usable = [i for i in current if i.provider_id and can_stop(i.provider)]
    ready = [i for i in filling if i.state is S.READY]
    booting = [i for i in filling if i.state is not S.READY]
    creates = []
    for create in plan.creates:
        if create.surge or create.fill:
            creates.append(create)
        elif ready:
            out.taken.append(ready.pop(0))
        elif usable:
            out.resumes.append((usable.pop(0), create))
        elif booting:
            out.taken.append(booting.pop(0))
        else:
            creates.append(create)
    plan.creates = creates


def plan_fill(
    name: str,
    tier: TierSpec,
    instances: Sequence[Instance],
    count: int,
    offers: Sequence[Offer],
    backoffs: Backoffs,
    now: float,
    can_stop: Callable[[str], bool],
    fleet: FleetBudget,
) -> Plan:
    """Up to ``count`` creates to fill the pool, on offers of providers that can stop (within the tier's and
    the fleet's budgets, as any create); what could not be placed is a note, not a silence."""
    stoppable = [o for o in offers if can_stop(o.provider)]
    plan = plan_creates(name, tier, instances, count, stoppable, backoffs, now, fleet=fleet)
    plan.creates = [replace(c, fill=True) for c in plan.creates]
    plan.notes = [Note(n.tier, UNPLACED, f"warm pool fill: {n.message}") for n in plan.notes]
    return plan


def _poolable(inst: Instance, current_hash: str | None, can_stop: Callable[[str], bool]) -> bool:
    """Booted fully once (it served), runs the current server, on-demand, at a provider that can stop it."""
    return (
        inst.state is S.READY
        and inst.ready_at is not None
        and inst.server_hash in (None, current_hash)
        and inst.capacity == Capacity.ON_DEMAND.value
        and not inst.interrupted
        and inst.notice_at is None
        and can_stop(inst.provider)
    )


def apply_pool(tick: Tick, pool: PoolPlan) -> None:
    """The pool's intents, stored at the tick's next commit (before any provider is asked)."""
    now = tick.now
    for drain in pool.deletes:
        tick.record(drain.instance.start_draining(now, drain.reason))
    for drain in pool.to_pool:
        reason = f"{drain.reason}; then stopped into the warm pool"
        tick.record(drain.instance.start_draining(now, reason, end_state=S.STOPPED))
    for inst in pool.taken:  # no longer bound for the pool: counted (booting or serving) from now on
        inst.end_state = S.TERMINATED
        tick.record(inst.move(inst.state, now, "taken from the warm pool's fill for a scale-out", TAKEN))
    for member, _create in pool.resumes:
        member.resumed_at = now
        tick.record(member.move(S.PROVISIONING, now, "starting from the warm pool", RESUMING))


class PoolCalls:
    """The provider calls of the pool: starts of members (scale-out) and stops of retired instances."""

    def __init__(self, providers: Mapping[str, Provider], calls: Calls):
        self.providers = providers
        self.calls = calls

        self._sizes: dict[str, int] = {}  # tier -> its auto pool's last size (an event when it changes)

    def can_stop(self, provider: str) -> bool:
        adapter = self.providers.get(provider)
        return adapter is not None and adapter.capabilities.stop_start

    def size(self, tick: Tick, name: str, tier: TierSpec, state: PolicyState | None, price: float | None) -> int | None:
        """A ``size: auto`` pool's size this tick (``pool_size.auto_size``), None for a fixed size. The disk's
        price is the first provider's that can stop; the cold boot the tier's measured one (else the boot
        model's), the resume the boot model's (``sizing.boot.resume_model``), both at their p90."""
        pool = tier.warm_pool
        if pool is None or not pool.auto:
            return None
        stopping = next((self.providers[p] for p in tier.providers if p in self.providers and self.can_stop(p)), None)
        cold = boot_time(state.learned) if state is not None else None
        cold = cold if cold is not None else boot_prior(tier.serving, tier.gpu_count)
        resume = _resume_s(tier)
        sized = auto_size(
            tier, state, price_per_hour=price, storage_per_hour=storage_price(stopping), cold_s=cold, resume_s=resume
        )
        if self._sizes.get(name) != sized.size:
            self._sizes[name] = sized.size
            tick.event(name, None, SIZED, f"warm pool size {sized.size}: {sized.reason}")
        return sized.size

    async def resume(self, tick: Tick, resumes: list[tuple[Instance, Create]]) -> list[Create]:
        """Start each member; the creates of those refused (their members drain for deletion)."""
        results = await self.calls.gather(self.providers[m.provider].start(m.provider_id or "") for m, _ in resumes)
        fallback = []
        for (member, create), result in zip(resumes, results, strict=True):
            if not isinstance(result, BaseException):
                continue
            why = "gone at the provider" if isinstance(result, InstanceNotFound) else one_line(result)
            tick.record(
                member.start_draining(
                    tick.now, f"start refused ({why}): deleted, a fresh create instead", end_state=S.FAILED,
                    event=RESUME_FAILED,
                )
            )  # fmt: skip
            fallback.append(create)
        return fallback


def _resume_s(tier: TierSpec) -> float | None:
    """The boot model's p90 start-to-serving of a stopped machine (a VM of unknown provider, as the cold
    prior); None when the catalogue does not know the model."""
    try:
        model = resolve_model(tier.serving.model, tier.serving.config_json)
    except (SizingError, ValueError, KeyError, OSError):
        return None
    return resume_model(boot_model("", tier.gpu_count, model), "").quantiles(0.9)[0]
