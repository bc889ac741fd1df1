"""Phase 5b, act on drains: delete draining instances once they are done (never served, drained to zero,
or past the drain timeout), and close their records; then tell the router which instances serve."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.controller.reconciler.sync import price_stopped
from scalectl.controller.reconciler.tick import Tick, by_tier
from scalectl.domain.instance import Instance, InstanceState
from scalectl.providers.base import Provider
from scalectl.providers.errors import InstanceNotFound, NotSupported
from scalectl.tiers.config import TierSpec

log = logging.getLogger("scalectl.reconciler")
DrainCheck = Callable[[Instance], Awaitable[float | None]]  # requests still running, None unknown


class RouteUpdate(Protocol):
    """The router's update: a tier's ready addresses; for a tier with variants also each address's weight
    (its capacity in tenths of a primary instance: ``ROUTE_WEIGHT_SCALE``), so the balancer sends an
    instance twice the work of one half its size."""

    def __call__(
        self, name: str, tier: TierSpec, addresses: list[str], weights: Mapping[str, int] | None = None, /
    ) -> Awaitable[None]: ...


ROUTE_WEIGHT_SCALE = 10  # a primary instance's weight; others in proportion to their capacity, at least 1
RouteRemove = Callable[[str], Awaitable[None]]  # a removed tier's routing (its upstream) goes away
POOLED = "pooled"  # event: a drained instance stopped into its tier's warm pool
NOTICE_DRAIN_MAX = 90.0  # an instance warned of a reclaim drains at most this long (AWS warns 120 s ahead)


class RetirePhase:
    def __init__(self, providers: Mapping[str, Provider], calls: Calls, drain_check: DrainCheck | None):
        self.providers = providers
        self.calls = calls
        self.drain_check = drain_check

    async def run(self, tick: Tick, instances: list[Instance]) -> None:
        await self._delete(tick, await self._drained(tick, instances))

    async def _drained(self, tick: Tick, instances: list[Instance]) -> list[Instance]:
        now = tick.now
        draining = [i for i in instances if i.state is InstanceState.DRAINING and (i.next_attempt_at or 0) <= now]
        done, checks = [], []
        for inst in draining:
            tier = tick.tiers.get(inst.tier) or tick.removed.get(inst.tier)
            timeout = tier.drain_timeout if tier is not None else 0.0  # a tier no stored version knows
            if inst.interrupted:  # warned of a reclaim: finish what runs, within the notice window
                timeout = min(timeout, NOTICE_DRAIN_MAX)
            if inst.ready_at is None or self.drain_check is None or inst.address is None or inst.stopped_at is not None:
                done.append(inst)  # never served, nothing to ask, or stopped: nothing runs on it
            elif now - (inst.drain_started_at or now) >= timeout:
                inst.reason = f"{inst.reason}; drain timeout {timeout:g}s passed"
                done.append(inst)
            else:
                checks.append(inst)
        if checks and self.drain_check is not None:
            running = await self.calls.gather(self.drain_check(i) for i in checks)
            done.extend(i for i, n in zip(checks, running, strict=True) if isinstance(n, int | float) and n <= 0)
        return done

    async def _stop(self, tick: Tick, instances: list[Instance]) -> list[Instance]:
        """Stop the drained instances bound for the warm pool; returns those to delete instead (the provider
        cannot stop this one after all). A stop that fails otherwise is tried again later."""
        targets = [i for i in instances if i.end_state is InstanceState.STOPPED and i.provider in self.providers]
        results = await self.calls.gather(self.providers[i.provider].stop(i.provider_id or "") for i in targets)
        delete = [i for i in instances if i not in targets]
        for inst, result in zip(targets, results, strict=True):
            if isinstance(result, NotSupported):
                inst.end_state = InstanceState.TERMINATED
                inst.reason = f"{inst.reason}; cannot be stopped ({one_line(result)}): deleted"
                delete.append(inst)
            elif isinstance(result, InstanceNotFound):
                tick.record(inst.end(InstanceState.FAILED, tick.now, "gone at the provider before its stop", "lost"))
            elif isinstance(result, BaseException):
                inst.next_attempt_at = tick.now + (getattr(result, "retry_after", None) or 10.0)
                tick.event(inst.tier, inst.key, "stop-retry", one_line(result))
            else:
                reason = price_stopped(inst, self.providers.get(inst.provider), "stopped into the warm pool")
                tick.record(inst.move(InstanceState.STOPPED, tick.now, reason, POOLED))
        return delete

    async def _delete(self, tick: Tick, instances: list[Instance]) -> None:
        instances = await self._stop(tick, instances)
        targets = [i for i in instances if i.provider_id and i.provider in self.providers]
        results = await self.calls.gather(self.providers[i.provider].delete(i.provider_id or "") for i in targets)
        for inst, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, InstanceNotFound):
                inst.next_attempt_at = tick.now + (getattr(result, "retry_after", None) or 10.0)
                tick.event(inst.tier, inst.key, "delete-retry", one_line(result))
                continue
            tick.record(inst.retire(tick.now))
        for inst in instances:
            if not inst.provider_id:  # nothing was ever created for it: just close the record
                tick.record(inst.retire(tick.now))


def route_weights(tier: TierSpec, ready: Sequence[Instance]) -> dict[str, int] | None:
    """Each ready address's routing weight, by its capacity (None for a tier without variants: all equal)."""
    if not tier.variants:
        return None
    return {
        i.address: max(1, round(ROUTE_WEIGHT_SCALE * tier.capacity_units(i.gpu, i.gpu_count)))
        for i in ready
        if i.address
    }


class Routes:
    """Tells the router the ready addresses of each tier, when they changed. A removed tier is first
    routed nowhere (its instances drain), then, once none is left, its routing is removed."""

    def __init__(self, update: RouteUpdate | None, remove: RouteRemove | None = None):
        self.update = update
        self.remove = remove
        self._routes: dict[str, tuple[list[str], TierSpec, dict[str, int] | None]] = {}

    async def run(self, tick: Tick) -> None:
        if self.update is None:
            return
        grouped = by_tier(await tick.db.run(tick.uow.instances.live))
        for name, tier in tick.tiers.items():
            ready = [i for i in grouped[name] if i.state is InstanceState.READY and i.address]
            await self._route(name, tier, sorted(i.address for i in ready if i.address), route_weights(tier, ready))
        for name, tier in tick.removed.items():
            if grouped[name]:
                await self._route(name, tier, [])
            elif name in self._routes:
                await self._remove(name)

    async def _route(
        self, name: str, tier: TierSpec, endpoints: list[str], weights: dict[str, int] | None = None
    ) -> None:
        if self.update is None or self._routes.get(name) == (endpoints, tier, weights):
            return  # the same addresses for the same spec (a changed spec may change the route: activator)
        try:
            if weights is None:
                await self.update(name, tier, endpoints)
            else:
                await self.update(name, tier, endpoints, weights)
            self._routes[name] = (endpoints, tier, weights)
        except Exception as exc:
            log.error("routing update for %s failed: %s", name, one_line(exc))

    async def _remove(self, name: str) -> None:
        try:
            if self.remove is not None:
                await self.remove(name)
            del self._routes[name]
        except Exception as exc:
            log.error("removing the routing of %s failed: %s", name, one_line(exc))
