"""One reconcile tick, as phases: sync (adopt, observe) → garbage collection → decide → plan → act
(creates with failover, deletes, routes) → record.

Level-triggered: every tick recomputes from stored state and the providers' answers, so a missed event
heals on the next tick. The crash rule: an instance (with its idempotency key) is committed before the
provider is asked to create it — ``uow.commit()`` before ``CreatePhase.run`` — and anything carrying
our key prefix that no row knows is an orphan and is deleted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from scalectl.clocks import Clock
from scalectl.controller.ha.shards import TickScope
from scalectl.controller.reconciler import scale
from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.calls import Calls
from scalectl.controller.reconciler.controls import Controls
from scalectl.controller.reconciler.create import CreatePhase, PendingCreate, ServerFor
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.decision import DecidePhase
from scalectl.controller.reconciler.fleet_budget import FleetBudget
from scalectl.controller.reconciler.garbage import Duplicates, collect_garbage
from scalectl.controller.reconciler.observe import observe_tick
from scalectl.controller.reconciler.offers import TierOffers
from scalectl.controller.reconciler.placement import UNAVAILABLE_FOR
from scalectl.controller.reconciler.plan import NO_PLACEMENT, SPOT_WAIT, Create, Plan, instance_price, plan_tier
from scalectl.controller.reconciler.pool import PoolCalls, PoolPlan, apply_pool, plan_fill, plan_pool
from scalectl.controller.reconciler.record import Recorder
from scalectl.controller.reconciler.replace import hand_backs, offers_to_avoid, unreplaced_notices
from scalectl.controller.reconciler.report import TickReport, TierTick
from scalectl.controller.reconciler.request_counts import RequestCounts
from scalectl.controller.reconciler.retire import (
    NOTICE_DRAIN_MAX,
    DrainCheck,
    RetirePhase,
    RouteRemove,
    Routes,
    RouteUpdate,
)
from scalectl.controller.reconciler.rollouts import Rollouts
from scalectl.controller.reconciler.sync import ReadinessCheck, SyncPhase
from scalectl.controller.reconciler.tick import Tick, by_tier
from scalectl.controller.store.instances import FleetShare
from scalectl.controller.store.off_loop import StoreCalls
from scalectl.controller.store.repository import Store
from scalectl.domain.instance import Instance, InstanceState
from scalectl.providers.base import Capacity, Provider
from scalectl.sources.reading import SignalSource, TierReading
from scalectl.tiers.config import TierSpec

__all__ = ["NOTICE_DRAIN_MAX", "Reconciler", "TickReport", "TierTick"]
OFFERS_TTL = 60.0


class Reconciler:
    def __init__(
        self,
        store: Store,
        providers: Mapping[str, Provider],
        signals: SignalSource,
        clock: Clock,
        *,
        key_prefix: str = "sc-",
        policy: PolicyRunner | None = None,
        readiness: ReadinessCheck | None = None,
        drain_check: DrainCheck | None = None,
        server_for: ServerFor | None = None,
        route_update: RouteUpdate | None = None,
        route_remove: RouteRemove | None = None,
        max_concurrent_calls: int = 32,
        offers_ttl: float = OFFERS_TTL,
        offer_unavailable_for: float = UNAVAILABLE_FOR,
        store_calls: StoreCalls | None = None,
        observe: bool = False,
    ):
        self.store, self.clock = store, clock
        # The daemon runs store work in worker threads (its loop keeps answering); tests and the simulator inline.
        self.db = store_calls or StoreCalls(clock, threaded=False)
        self.providers = dict(providers)  # the daemon adds adapters for providers applied while running
        calls = Calls(max_concurrent_calls)
        self.backoffs = Backoffs(offer_unavailable_for)
        self.offers = TierOffers(self.providers, calls, clock, offers_ttl)
        self.recorder = Recorder(signals)
        self.sync = SyncPhase(self.providers, calls, self.backoffs, key_prefix, readiness)
        self.decide = DecidePhase(store, policy or PolicyRunner(), signals, clock)
        self.controls = Controls(store, self.decide)  # `scalectl scale` and `scalectl pause`
        self.creates = CreatePhase(
            self.providers, calls, self.backoffs, self.offers, self.recorder, key_prefix, server_for
        )
        self.retire = RetirePhase(self.providers, calls, drain_check)
        self.pool = PoolCalls(self.providers, calls)
        self._resumes: list[tuple[Instance, Create]] = []  # this tick's starts of warm pool members
        self.routes = Routes(route_update, route_remove)
        self.request_counts = RequestCounts()
        self.rollouts = Rollouts(store, self.recorder)
        self._removed: dict[str, TierSpec] = {}  # last known specs of tiers gone from the configuration
        self._known: dict[str, TierSpec] = {}
        self._looked_up: set[str] = set()
        self._calls = calls
        self.duplicates = Duplicates()  # when each second instance under a live key was first seen
        self._started = False
        self.observe = observe  # `scalectl daemon --observe`: decide and record, call no provider (observe.py)

    async def tick(self, scope: TickScope | None = None) -> TickReport:
        """One tick over every tier, or (``scope``, when daemons split the tiers) over the tiers this
        daemon holds leases on; only the scope's housekeeper deletes instances no live row explains."""
        if self.observe:
            return await observe_tick(self, scope)
        now = self.clock.now()
        report = TickReport(t=now)
        db = self.db.run
        fleet = await db(self.store.config.fleet_config)
        configured = dict(fleet.tiers) if fleet is not None else {}
        tiers = configured if scope is None else {n: t for n, t in configured.items() if scope.owns(n)}
        new, gone = await db(self.decide.follow, tiers, now)  # policy timers and history, from the store
        if not self._started:  # what the store remembers: back-offs, every tier's and offer-wide
            self.backoffs.load(await db(self.store.failures.history, now - self.backoffs.memory))
            self._started = True
        elif new or gone:  # tiers taken over (or applied) resume their back-offs; those handed over drop theirs
            self.backoffs.follow(await db(self.store.failures.history, now - self.backoffs.memory), new, gone)
        report.provider_errors.update(await self.offers.refresh(tiers))
        uow = await db(self.store.unit_of_work().__enter__)
        try:
            tick = Tick(now, tiers, uow, report, db=self.db)
            # Sharded, a tick builds only its own tiers' instances: the rest of the fleet is a sum for the
            # fleet budget and, for the housekeeper, a set of keys for garbage collection.
            live = await db(uow.instances.live, None if scope is None else scope.tiers)
            housekeeping = scope is None or scope.housekeeping
            known = set()  # the keys of every live row, read before the listings (garbage collection)
            if housekeeping:
                known = {i.key for i in live} if scope is None else await db(uow.instances.live_keys)
            seen = await self.sync.run(tick, live, everywhere=housekeeping)
            self._note_unanswered(tick)
            if housekeeping:
                report.orphans_deleted = await collect_garbage(
                    tick, self.providers, self._calls, seen, known, self.duplicates
                )
            others = {} if scope is None else await db(uow.instances.live_shares, excluding=scope.tiers)
            await db(uow.commit)
            live = [i for i in live if i.state.is_live]
            grouped = by_tier(live)
            tick.removed = await db(self._removed_tiers, configured, grouped)
            readings = await self.decide.read_signals(tiers, grouped)
            creates = self.creates.retries(tick, live)
            cap = fleet.budget_per_hour if fleet is not None else None
            tick.fleet_budget = self._fleet_budget(cap, configured, grouped, others)
            tick.rollout_controls = await db(self.store.rollouts.controls)
            # Planning is pure but for the store reads and writes it makes (policy state, rollouts): one trip.
            self._resumes = []
            creates += await db(self._plan_tiers, tick, tiers, grouped, readings)
            for name in set(grouped) - set(configured):  # tier removed from the configuration: retire everything
                for inst in grouped[name]:
                    if inst.state is not InstanceState.DRAINING:
                        tick.record(inst.start_draining(now, "tier removed from the configuration"))
            await db(uow.commit)  # the crash rule: intents are stored before any provider is asked to create them
            fallback = await self.pool.resume(tick, self._resumes) if self._resumes else []
            if fallback:  # starts refused: their members drain for deletion, the creates they stood in for go now
                creates += await db(self._intents, tick, fallback)
                await db(uow.commit)
            await self.creates.run(tick, creates)
            await self.retire.run(tick, live)
            await db(uow.commit)
            await self.routes.run(tick)
        finally:
            await db(uow.__exit__, None, None, None)
        return report

    def _intents(self, tick: Tick, steps: list[Create]) -> list[PendingCreate]:
        return [self.creates.intent(tick, step) for step in steps]

    def _note_unanswered(self, tick: Tick) -> None:
        """A tier whose provider did not answer keeps what it has: say so on the tier (once, then every few
        minutes while it lasts), not only in the daemon's log."""
        errors = tick.report.provider_errors
        for name, tier in tick.tiers.items():
            failing = [f"{p}: {errors[p]}" for p in tier.providers if p in errors]
            if failing:
                self.recorder.note(tick, name, "provider-unanswered", "holds its instances: " + "; ".join(failing))

    def _plan_tiers(
        self,
        tick: Tick,
        tiers: Mapping[str, TierSpec],
        grouped: Mapping[str, list[Instance]],
        readings: Mapping[str, TierReading],
    ) -> list[PendingCreate]:
        creates: list[PendingCreate] = []
        self.controls.refresh()
        for name in self._planning_order(tiers):  # who gets capacity first when the fleet budget binds
            creates += self._decide_and_plan(tick, name, tiers[name], grouped[name], readings[name])
        return creates

    @staticmethod
    def _fleet_budget(
        cap: float | None,
        tiers: Mapping[str, TierSpec],
        grouped: Mapping[str, list[Instance]],
        others: Mapping[str, FleetShare],
    ) -> FleetBudget:
        """This tick's fleet budget: what bills now (this tick's instances, and ``others``: the tiers other
        daemons act on), and each tier's unmet floor held at catalogue price."""
        if cap is None:  # no cap: nothing reads what bills (two passes over every instance, each tick)
            return FleetBudget(None, 0.0)
        spend = sum(i.billing_per_hour for insts in grouped.values() for i in insts)
        spend += sum(share.spend for share in others.values())
        reserved = {}
        for name, tier in tiers.items():
            share = others.get(name)
            mine = grouped.get(name, [])
            if share is not None:
                counted: float = share.counted
            elif tier.variants:  # the floor is in primary units
                counted = scale.total([i for i in mine if i.counted], scale.units_of(tier))
            else:
                counted = sum(1 for i in mine if i.counted)
            missing = max(0.0, tier.min - counted)
            price = tier.catalogue_price_per_hour()
            if missing and price:
                reserved[name] = missing * price
        return FleetBudget(cap, spend, reserved)

    def _planning_order(self, tiers: Mapping[str, TierSpec]) -> list[str]:
        """User-facing tiers (a latency target) before batch tiers, then by name."""
        return sorted(tiers, key=lambda name: (not tiers[name].user_facing, name))

    def _removed_tiers(
        self, tiers: Mapping[str, TierSpec], grouped: Mapping[str, list[Instance]]
    ) -> dict[str, TierSpec]:
        """Tiers gone from the configuration that still have instances (or routing) to retire, with their
        last applied spec: its drain timeout still holds for its instances."""
        self._removed.update({n: spec for n, spec in self._known.items() if n not in tiers})
        self._known = dict(tiers)
        unknown = {n for n, insts in grouped.items() if insts and n not in tiers and n not in self._removed}
        if unknown - self._looked_up:  # after a restart: the store's older configuration versions know them
            self._removed.update(self.store.config.removed_tier_specs(unknown))
            self._looked_up |= unknown  # a tier no version knows drains without a timeout; asked once
        for name in [n for n in self._removed if n in tiers]:
            del self._removed[name]  # applied again
        removed = dict(self._removed)
        for name in [n for n in self._removed if not grouped.get(n)]:
            del self._removed[name]  # nothing left: one last tick for its routing to go, then forgotten
        return removed

    def _decide_and_plan(
        self, tick: Tick, name: str, tier: TierSpec, instances: list[Instance], reading: TierReading
    ) -> list[PendingCreate]:
        rollout = self.rollouts.view(tick, name, tier, instances)
        self._hand_back(tick, instances, rollout.current_hash, spot_fallback=tier.fallback is not None)
        offers = self.offers.of(tier)
        price = instance_price(name, tier, offers, self.backoffs, tick.now)
        counted, unreplaced = [i for i in instances if i.counted], unreplaced_notices(instances)
        units = self._units(tier, counted, unreplaced)
        booting = self._units(tier, [i for i in counted if i.state is not InstanceState.READY], []) or 0.0
        decision = self.decide.decide(
            tick, name, tier, counted, reading, price, replacing=len(unreplaced), units=units, booting_units=booting
        )
        decision = self.controls.apply(tick, name, tier, decision, price)
        avoid = offers_to_avoid(instances)
        # variants: the policy's change applies to the exact units (it saw them rounded), so a hold holds
        desired = decision.desired if units is None else decision.desired + units - decision.current
        plan = plan_tier(
            name, tier, instances, desired, decision.reason, offers, self.backoffs, tick.now,
            avoid=avoid, fleet=tick.fleet_budget, rollout=rollout,
        )  # fmt: skip
        size = self.pool.size(tick, name, tier, self.decide.state_of(name), price)  # None: as configured
        pool = plan_pool(tier, instances, plan, rollout.current_hash, self.pool.can_stop, size)
        fill = Plan()
        if pool.fill:  # members created for the pool, after the tier's own creates (which take the budget first)
            args = (name, tier, instances, pool.fill, offers, self.backoffs, tick.now, self.pool.can_stop)
            fill = plan_fill(*args, tick.fleet_budget)
        if any(n.kind == SPOT_WAIT for n in plan.notes):
            self.backoffs.spot_short(name, tick.now)  # fallback_after counts from the first wait
        elif any(c.placement.capacity is Capacity.SPOT for c in plan.creates):
            self.backoffs.spot_placed(name)
        tick.fleet_budget.planned(name)
        short = next((n.message for n in plan.notes if n.kind == NO_PLACEMENT), None)
        if short is not None:  # hold what capacity allows, and say so
            reached = len(counted) + len(plan.creates)
            if units is not None:  # in the policy's whole instances
                reached = math.ceil(units + sum(c.placement.units for c in plan.creates) - scale.EPS)
            decision = self.decide.hold_at(tick, name, decision, reached, short)
        self.recorder.decision(tick, name, decision, reading)
        if reading.signals.arrivals is not None:  # what cost per 1,000 requests divides by
            finished = self.request_counts.add(name, tick.now, reading.signals.arrivals)
            if finished is not None:
                tick.uow.add_requests(name, *finished)
        ready = sum(1 for i in instances if i.state is InstanceState.READY)
        tick.report.tiers[name] = TierTick(
            name, decision.current, decision.desired, decision.reason, ready, plan.launched, plan.retired,
            signals=reading.signals, errors=reading.errors,
        )  # fmt: skip
        return self._apply(tick, plan, pool) + self._apply(tick, fill, PoolPlan())

    @staticmethod
    def _units(tier: TierSpec, counted: list[Instance], unreplaced: list[Instance]) -> float | None:
        """A tier with variants: its counted and not-yet-replaced instances in primary units (None without)."""
        if not tier.variants:
            return None
        worth = scale.units_of(tier)
        return scale.total(counted, worth) + scale.total(unreplaced, worth)

    @staticmethod
    def _hand_back(tick: Tick, instances: list[Instance], current_hash: str, *, spot_fallback: bool) -> None:
        """A ready surge takes the place of the instance it replaces (a drifted one in a rollout, else an
        on-demand fallback) before the policy counts the tier, so the policy never sees (and holds) the
        surge on top of it."""
        for hand in hand_backs(instances, current_hash, spot_fallback=spot_fallback):
            replaced = hand.fallback
            tick.record(hand.surge.take_place(tick.now, f"ready; replaces {replaced.key if replaced else 'nothing'}"))
            if replaced is None:
                continue
            if replaced.server_hash not in (None, current_hash):
                why = f"rollout: replaced by {hand.surge.key}, which runs the current server"
            else:
                why = f"handed back to spot: {hand.surge.key} is ready"
            tick.record(replaced.start_draining(tick.now, why))

    def _apply(self, tick: Tick, plan: Plan, pool: PoolPlan) -> list[PendingCreate]:
        """The plan's drains start now; its creates (and the pool's starts) become intents, stored at the
        next commit."""
        apply_pool(tick, pool)
        self._resumes += pool.resumes
        creates: list[PendingCreate] = []
        for step in [*plan.drains, *plan.rebalances, *plan.creates]:
            if isinstance(step, Create):
                creates.append(self.creates.intent(tick, step))
            else:
                tick.record(step.instance.start_draining(tick.now, step.reason))
        for note in plan.notes:
            self.recorder.note(tick, note.tier, note.kind, note.message)
        return creates

    # ---- hooks the serving path (and tests) may set after construction ---------------------------
    @property
    def server_for(self) -> ServerFor | None:
        return self.creates.server_for

    @server_for.setter
    def server_for(self, hook: ServerFor | None) -> None:
        self.creates.server_for = hook

    @property
    def drain_check(self) -> DrainCheck | None:
        return self.retire.drain_check

    @drain_check.setter
    def drain_check(self, hook: DrainCheck | None) -> None:
        self.retire.drain_check = hook
