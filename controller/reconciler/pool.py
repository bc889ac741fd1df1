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
- Never a leak: members of another server (the tier's configuration changed), beyond ``max``, or of a tier
  with no pool any more are deleted; a member is a live row like any other, so garbage collection and
  adoption treat its machine as they treat a running one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.controller.reconciler.plan import Create, Drain, Plan
from scalectl.controller.reconciler.tick import Tick
from scalectl.domain.instance import Instance, InstanceState
from scalectl.providers.base import Capacity, Provider
from scalectl.providers.errors import InstanceNotFound
from scalectl.tiers.config import TierSpec

S = InstanceState
RESUME_FAILED = "resume-failed"  # event: a start refused (the member is deleted; a create takes its place)
RESUME_TIMEOUT = "resume-timeout"  # event: a started member not serving within resume_timeout
RESUMING = "resuming"  # event: a member's start is about to be sent


@dataclass
class PoolPlan:
    """What a tier's pool does this tick, beside the tier's plan."""

    resumes: list[tuple[Instance, Create]] = field(default_factory=list)  # member, the create it replaces
    to_pool: list[Drain] = field(default_factory=list)  # scale-in drains that end stopped, not deleted
    deletes: list[Drain] = field(default_factory=list)  # members that leave the pool for good


def members(instances: Sequence[Instance]) -> list[Instance]:
    return [i for i in instances if i.pooled]


def resuming(inst: Instance) -> bool:
    """Started from the pool (or stopped and started again) and not serving yet: its boot is a resume."""
    return inst.resumed_at is not None and inst.state in (S.PROVISIONING, S.BOOTSTRAPPING)


def plan_pool(
    tier: TierSpec | None,
    instances: Sequence[Instance],
    plan: Plan,
    current_hash: str | None,
    can_stop: Callable[[str], bool],
) -> PoolPlan:
    """Mutates ``plan``: creates a member stands in for, and drains that go to the pool, leave it."""
    out = PoolPlan()
    pool = tier.warm_pool if tier is not None else None
    kept = sorted(members(instances), key=lambda i: -(i.stopped_at or 0.0))  # most recently stopped first
    if pool is None:
        out.deletes = [Drain(i, "warm pool member of a tier without a warm pool: deleted") for i in kept]
        return out
    current = [i for i in kept if i.server_hash in (None, current_hash)]
    out.deletes = [Drain(i, "warm pool member of an older server: deleted") for i in kept if i not in current]
    out.deletes += [Drain(i, f"warm pool beyond its max ({pool.most}): deleted") for i in current[pool.most :]]
    current = current[: pool.most]
    usable = [i for i in current if i.provider_id and can_stop(i.provider)]
    creates = []
    for create in plan.creates:
        if usable and not create.surge:
            out.resumes.append((usable.pop(0), create))
        else:
            creates.append(create)
    plan.creates = creates
    on_the_way = sum(1 for i in instances if i.state is S.DRAINING and i.end_state is S.STOPPED)
    room = pool.size - (len(current) - len(out.resumes)) - on_the_way
    drains = []
    for drain in plan.drains:
        if room > 0 and _poolable(drain.instance, current_hash, can_stop):
            out.to_pool.append(drain)
            room -= 1
        else:
            drains.append(drain)
    plan.drains = drains
    return out


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
    for member, _create in pool.resumes:
        member.resumed_at = now
        tick.record(member.move(S.PROVISIONING, now, "starting from the warm pool", RESUMING))


class PoolCalls:
    """The provider calls of the pool: starts of members (scale-out) and stops of retired instances."""

    def __init__(self, providers: Mapping[str, Provider], calls: Calls):
        self.providers = providers
        self.calls = calls

    def can_stop(self, provider: str) -> bool:
        adapter = self.providers.get(provider)
        return adapter is not None and adapter.capabilities.stop_start

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
