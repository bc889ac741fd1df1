"""One reconcile tick: observe → decide → diff desired vs actual → act → record.

Level-triggered: every tick recomputes from stored state and the providers' answers, so a missed event
heals on the next tick. The crash rule holds throughout: an instance row (with its idempotency key) is
committed before the provider is asked to create it, and anything carrying our key prefix that no row
knows is an orphan and is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from clocks import Clock
from controller.config import TierSpec
from controller.offers import OfferCache
from controller.reconciler import lifecycle, placement, scale
from controller.reconciler.decide import PolicyRunner
from controller.signals.reading import SignalSource, TierReading
from controller.store.models import DecisionRecord, EventRecord, InstanceRecord
from controller.store.repository import Store
from policies.types import PolicyInput, PolicyState, Signals
from providers.base import Capacity, GpuRequest, LaunchSpec, Offer, Provider, ProviderInstance
from providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InsufficientCapacity,
    ProviderError,
    QuotaExceeded,
    RateLimited,
)
from providers.tagging import TIER_TAG
from sizing.server import ServerDescription

log = logging.getLogger("scalectl.reconciler")
T = TypeVar("T")

ReadinessCheck = Callable[[TierSpec, InstanceRecord], Awaitable[tuple[bool, str]]]
DrainCheck = Callable[[InstanceRecord], Awaitable[float | None]]  # requests still running, None unknown
ServerFor = Callable[[str, TierSpec], ServerDescription]  # what a tier's launches carry
RouteUpdate = Callable[[str, TierSpec, list[str]], Awaitable[None]]

OFFERS_TTL = 60.0
SPOT_BACKOFF_AFTER = 3  # interruptions within the window that switch a tier to its fallback
SPOT_BACKOFF_WINDOW = 1800.0
RECORD_EVERY = 60.0  # a decision is recorded when it changes, and at least this often
MAX_PLACEMENT_ROUNDS = 3  # failover attempts within one tick after no-capacity answers
CREATE_BACKOFF_FIRST = 10.0  # seconds a tier waits after a create failed for a non-retryable reason
CREATE_BACKOFF_MAX = 600.0
NOTICE_DRAIN_MAX = 90.0  # an instance warned of a reclaim drains at most this long (AWS warns 120 s ahead)
NOTE_EVERY = 300.0  # a repeating condition's event is written again at most this often


@dataclass
class TierTick:
    """What one tick saw and did for a tier (returned for logs, tests and the simulator)."""

    tier: str
    current: int
    desired: int
    reason: str
    ready: int
    launched: int = 0
    retired: int = 0
    signals: Signals = field(default_factory=Signals)
    errors: Mapping[str, str] = field(default_factory=dict)


@dataclass
class TickReport:
    t: float
    tiers: dict[str, TierTick] = field(default_factory=dict)
    provider_errors: dict[str, str] = field(default_factory=dict)
    orphans_deleted: int = 0


@dataclass
class _Create:
    row: InstanceRecord
    spec: LaunchSpec
    placement: placement.Placement


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
        max_concurrent_calls: int = 32,
        offers_ttl: float = OFFERS_TTL,
        offer_unavailable_for: float = placement.UNAVAILABLE_FOR,
    ):
        self.store = store
        self.providers = dict(providers)
        self.signals = signals
        self.clock = clock
        self.key_prefix = key_prefix
        self.policy = policy or PolicyRunner()
        self.readiness = readiness
        self.drain_check = drain_check
        self.server_for = server_for
        self.route_update = route_update
        self._limit = asyncio.Semaphore(max_concurrent_calls)
        self.offer_cache = OfferCache(clock, ttl=offers_ttl)
        self.unavailable = placement.UnavailableOffers()
        self.offer_unavailable_for = offer_unavailable_for
        self._interruptions: dict[str, deque[float]] = defaultdict(deque)
        self._states: dict[str, tuple[PolicyState, int]] | None = None
        self._last_recorded: dict[str, tuple[int, str, float]] = {}
        self._routes: dict[str, list[str]] = {}
        self._create_backoff: dict[str, tuple[int, float]] = {}  # tier -> (failures in a row, no creates until)
        self._notes: dict[tuple[str, str], tuple[str, float]] = {}
        self.readings: dict[str, TierReading] = {}

    # ---- the tick --------------------------------------------------------------------------------
    async def tick(self) -> TickReport:
        now = self.clock.now()
        report = TickReport(t=now)
        tiers = self.store.active_tiers()
        if self._states is None:
            self._states = self.store.policy_states()
            reach = self.policy.history_reach(tiers)
            if reach > 0:  # forecasts look back this far: load what the store recorded
                self.policy.seed_history(self.store.demand_samples(now - reach), tiers)
        report.provider_errors.update(await self.refresh_offers(tiers))
        with self.store.sessions() as session:
            rows = self.store.live_instances(session)
            await self._sync_with_providers(session, rows, tiers, now, report)
            session.commit()
            rows = [r for r in rows if r.state in scale.COUNTED or r.state == "draining"]
            by_tier = _group_by_tier(rows)
            readings = await self._read_signals(tiers, by_tier)
            creates: list[_Create] = self._retries(rows, tiers, now)
            for name, tier in tiers.items():
                tick = self._decide_and_plan(session, name, tier, by_tier[name], readings[name], now, creates)
                report.tiers[name] = tick
            for name in set(by_tier) - set(tiers):  # tier removed from the config: retire everything
                for row in by_tier[name]:
                    if row.state != "draining":
                        self._start_draining(session, row, now, "tier removed from the configuration")
            session.commit()  # intent: rows exist (with keys) before any provider is called
            await self._execute_creates(session, creates, tiers, report, now)
            drained = await self._drained(rows, tiers, now)
            await self._delete_rows(session, drained, now)
            session.commit()
            await self._update_routes(session, tiers)
        return report

    # ---- phase 1: what the providers say -----------------------------------------------------------
    async def _sync_with_providers(
        self,
        session: Session,
        rows: list[InstanceRecord],
        tiers: Mapping[str, TierSpec],
        now: float,
        report: TickReport,
    ) -> None:
        names = sorted(set(self.providers))
        listings = await asyncio.gather(*(self._call(self.providers[n].list(self.key_prefix)) for n in names))
        seen: dict[str, dict[str, ProviderInstance]] = {}
        by_key: dict[str, ProviderInstance] = {}
        for name, result in zip(names, listings, strict=True):
            if isinstance(result, BaseException):
                report.provider_errors[name] = _one_line(result)
                continue
            seen[name] = {i.provider_id: i for i in result}
            for listed in result:
                if listed.key:
                    by_key[listed.key] = listed
        rows_by_key = {r.key: r for r in rows}
        # Rows whose instance is missing from the listing: ask for each directly (gone, or just not listed).
        missing = [r for r in rows if r.provider_id and r.provider in seen and r.provider_id not in seen[r.provider]]
        answers = await asyncio.gather(
            *(self._call(self.providers[r.provider].get(r.provider_id or "")) for r in missing)
        )
        confirmed: dict[str, ProviderInstance | None] = {}
        for row, answer in zip(missing, answers, strict=True):
            if isinstance(answer, InstanceNotFound):
                confirmed[row.key] = None
            elif isinstance(answer, ProviderInstance):
                confirmed[row.key] = answer
        for row in rows:
            tier = tiers.get(row.tier)
            if row.provider_id is None:
                adopted = by_key.get(row.key)
                if adopted is not None:
                    self._adopt(session, row, adopted, now)
                elif row.provider in seen and lifecycle.pending_expired(row, tier, now):
                    self._end(session, row, "failed", now, "no instance appeared within the launch timeout", "lost")
                continue
            if row.provider not in seen:
                continue  # provider unreachable this tick: hold
            inst: ProviderInstance | None = seen[row.provider].get(row.provider_id) or confirmed.get(row.key)
            gone = row.key in confirmed and confirmed[row.key] is None
            notice = row.notice_at is not None and row.state in ("provisioning", "bootstrapping", "ready")
            if notice and (inst is None or inst.interruption_notice_at is None):
                self._start_draining(session, row, now, "interruption notice (webhook)", interrupted=True)
                continue
            ready = row.provider in self.providers and self.providers[row.provider].capabilities.running_means_ready
            change = lifecycle.observe(row, inst, gone, tier, now, ready_on_running=ready)
            if change is not None:
                self._apply(session, row, change, now)
        await self._probe_bootstrapping(session, rows, tiers, now)
        report.orphans_deleted = await self._collect_garbage(session, seen, rows_by_key, now)

    async def _probe_bootstrapping(
        self, session: Session, rows: list[InstanceRecord], tiers: Mapping[str, TierSpec], now: float
    ) -> None:
        waiting = [r for r in rows if r.state == "bootstrapping" and r.tier in tiers]
        if not waiting:
            return
        if self.readiness is None:
            for row in waiting:
                self._set_state(session, row, "ready", now, "server up", "ready")
            return
        readiness = self.readiness
        results = await asyncio.gather(*(self._call(readiness(tiers[r.tier], r)) for r in waiting))
        for row, result in zip(waiting, results, strict=True):
            if isinstance(result, tuple) and result[0]:
                self._set_state(session, row, "ready", now, result[1] or "ready", "ready")
            elif isinstance(result, tuple):
                row.reason = f"waiting for readiness: {result[1]}"

    async def _collect_garbage(
        self,
        session: Session,
        seen: Mapping[str, Mapping[str, ProviderInstance]],
        rows_by_key: Mapping[str, InstanceRecord],
        now: float,
    ) -> int:
        """Instances with our prefix that no live row explains: delete them (ended rows whose machine
        is still there included). Nothing that bills may stay untracked."""
        unknown = [
            (name, inst)
            for name, listing in seen.items()
            for inst in listing.values()
            if inst.key and inst.key not in rows_by_key and not inst.status.is_gone
        ]
        if not unknown:
            return 0
        known_ended = self.store.known_keys(session, (inst.key or "" for _, inst in unknown))
        results = await asyncio.gather(*(self._call(self.providers[n].delete(i.provider_id)) for n, i in unknown))
        deleted = 0
        for (name, inst), result in zip(unknown, results, strict=True):
            what = "instance of an ended row" if inst.key in known_ended else "orphan (no row knows it)"
            if isinstance(result, BaseException):
                self._event(
                    session,
                    now,
                    None,
                    inst.key,
                    "orphan-delete-failed",
                    f"{name} {inst.provider_id}: {what}: {_one_line(result)}",
                )
                continue
            deleted += 1
            self._event(session, now, None, inst.key, "orphan-deleted", f"{name} {inst.provider_id}: {what}")
        return deleted

    # ---- phase 2: signals ------------------------------------------------------------------------
    async def _read_signals(
        self, tiers: Mapping[str, TierSpec], by_tier: Mapping[str, list[InstanceRecord]]
    ) -> dict[str, TierReading]:
        names = list(tiers)
        endpoints = [
            [r.address for r in by_tier.get(n, []) if r.state in ("ready", "draining") and r.address] for n in names
        ]
        results = await asyncio.gather(
            *(self.signals.read(n, tiers[n].signals, eps) for n, eps in zip(names, endpoints, strict=True)),
            return_exceptions=True,
        )
        readings: dict[str, TierReading] = {}
        now = self.clock.now()
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):  # a source must not raise; if one does, it is unknown
                result = TierReading(Signals(), now, {"signals": _one_line(result)})
            readings[name] = result
        self.readings = readings
        return readings

    # ---- phase 3 + 4: decide and plan ------------------------------------------------------------
    def _decide_and_plan(
        self,
        session: Session,
        name: str,
        tier: TierSpec,
        rows: list[InstanceRecord],
        reading: TierReading,
        now: float,
        creates: list[_Create],
    ) -> TierTick:
        assert self._states is not None
        counted = scale.counted(rows)
        current = len(counted)
        state, last_desired = self._states.get(name, (PolicyState(), current))
        try:
            booting = sum(1 for r in counted if r.state != "ready")
            inp = PolicyInput(now, reading.signals, current, state, self.policy.seasonal(name, tier, now), booting)
            decision = self.policy.decide(name, tier, inp)
            desired, reason, new_state, demand = decision.desired, decision.reason, decision.state, decision.demand
        except Exception as exc:  # a policy bug must not take the fleet down: hold, and say why
            log.exception("policy for tier %s failed", name)
            desired, reason, new_state, demand = current, f"policy error, holding: {_one_line(exc)}", state, None
        self._states[name] = (new_state, desired)
        if (new_state, desired) != (state, last_desired):  # the store holds the last change; skip no-op writes
            self.store.save_policy_state(session, name, new_state, desired, now)
        self._record_decision(session, name, now, current, desired, demand, reason, reading)
        tick = TierTick(
            name,
            current,
            desired,
            reason,
            sum(1 for r in rows if r.state == "ready"),
            signals=reading.signals,
            errors=reading.errors,
        )
        live = len(rows)  # counted + draining + surges: everything that bills
        if desired > current:
            room = max(0, tier.max - live)
            tick.launched = self._plan_creates(session, name, tier, rows, min(desired - current, room), now, creates)
        elif desired < current:
            for row in scale.retirement_order(counted, tier.capacity)[: current - desired]:
                self._start_draining(session, row, now, f"scale in: {reason}")
                tick.retired += 1
        else:
            tick.launched = self._plan_rebalance(session, name, tier, rows, now, creates)
        return tick

    def _plan_creates(
        self,
        session: Session,
        name: str,
        tier: TierSpec,
        rows: list[InstanceRecord],
        count: int,
        now: float,
        creates: list[_Create],
        *,
        surge: bool = False,
    ) -> int:
        if count <= 0 or now < self._create_backoff.get(name, (0, 0.0))[1]:
            return 0  # nothing wanted, or creates keep failing: wait out the back-off
        spend = sum(r.price_per_hour for r in rows)
        ranked = placement.ranked_offers(
            tier, self._cached_offers(tier), self.unavailable, now, spot_backoff=self._spot_backoff(name, now)
        )
        in_use: dict[str, int] = defaultdict(int)
        planned = 0
        for _ in range(count):
            chosen = placement.choose(ranked, spend, tier.budget_per_hour, in_use)
            if chosen is None:
                why = "budget" if ranked else "no available offer"
                self._note(session, now, name, "no-placement", f"cannot place an instance of {tier.gpu}: {why}")
                break
            in_use[chosen.offer.offer_id] += 1
            spend += chosen.price_per_hour
            creates.append(self._intent(session, name, tier, chosen, now, surge))
            planned += 1
        return planned

    def _plan_rebalance(
        self,
        session: Session,
        name: str,
        tier: TierSpec,
        rows: list[InstanceRecord],
        now: float,
        creates: list[_Create],
    ) -> int:
        """Spot is back and cheaper: replace one on-demand fallback instance with spot. Make-before-break
        (a surge instance, then the fallback drains) when the tier has room under ``max``; at ``max``,
        break-before-make (the fallback drains, and the scale-out that follows places spot), since ``max``
        is never exceeded. One replacement at a time."""
        if tier.capacity != "spot" or tier.fallback is None or self._spot_backoff(name, now):
            return 0
        if any((r.surge and r.state != "ready") or r.state == "draining" for r in rows):
            return 0
        fallbacks = [r for r in rows if r.state == "ready" and r.capacity == Capacity.ON_DEMAND.value]
        if not fallbacks:
            return 0
        costliest = max(fallbacks, key=lambda r: r.price_per_hour)
        at_max = len(rows) >= tier.max
        spend = sum(r.price_per_hour for r in rows) - (costliest.price_per_hour if at_max else 0.0)
        spot_tier = tier.model_copy(update={"fallback": None})
        ranked = placement.ranked_offers(spot_tier, self._cached_offers(tier), self.unavailable, now)
        chosen = placement.choose(ranked, spend, tier.budget_per_hour, {})
        if chosen is None or chosen.price_per_hour >= costliest.price_per_hour:
            return 0  # no spot, or spot no cheaper (A100 spot sometimes costs more): keep what runs
        if at_max:
            self._start_draining(session, costliest, now, "hand back to spot (at max: drain first)")
            return 0
        creates.append(self._intent(session, name, tier, chosen, now, surge=True))
        return 1

    def _intent(
        self, session: Session, name: str, tier: TierSpec, chosen: placement.Placement, now: float, surge: bool
    ) -> _Create:
        key = f"{self.key_prefix}{name}-{secrets.token_hex(4)}"[:63]
        row = InstanceRecord(
            key=key,
            tier=name,
            state="pending",
            provider=chosen.offer.provider,
            provider_id=None,
            offer_id=chosen.offer.offer_id,
            gpu=chosen.offer.gpu,
            gpu_count=chosen.offer.gpu_count,
            region=chosen.offer.region,
            capacity=chosen.capacity.value,
            price_per_hour=chosen.price_per_hour,
            reason="fallback to on-demand" if chosen.fallback else ("surge: spot is back" if surge else "scale out"),
            created_at=now,
            updated_at=now,
            attempts=0,
            surge=surge,
            interrupted=False,
            cost=0.0,
            end_state="terminated",
        )
        session.add(row)
        return _Create(row, self._launch_spec(key, name, tier, chosen.offer, chosen.capacity), chosen)

    def _launch_spec(self, key: str, name: str, tier: TierSpec, offer: Offer, capacity: Capacity) -> LaunchSpec:
        """What a create asks for; built the same way for a first try and for a retry with the same key."""
        server = self.server_for(name, tier) if self.server_for else None
        return LaunchSpec(key=key, tier=name, offer=offer, capacity=capacity, server=server, tags={TIER_TAG: name})

    # ---- phase 5: act ----------------------------------------------------------------------------
    async def _execute_creates(
        self, session: Session, creates: list[_Create], tiers: Mapping[str, TierSpec], report: TickReport, now: float
    ) -> None:
        """Create what was planned; on no-capacity, mark the offer unavailable and re-place on the next
        one, a bounded number of rounds per tick."""
        for _round in range(MAX_PLACEMENT_ROUNDS):
            if not creates:
                return
            results = await asyncio.gather(
                *(self._call(self.providers[c.spec.offer.provider].create(c.spec)) for c in creates)
            )
            retry: list[_Create] = []
            refused: dict[str, str] = {}  # tier -> the first error that a retry cannot fix
            for create, result in zip(creates, results, strict=True):
                row = create.row
                row.attempts += 1
                if isinstance(result, ProviderInstance):
                    self._adopt(session, row, result, now)
                    self._create_backoff.pop(row.tier, None)
                    continue
                error = _one_line(result)
                if isinstance(result, InsufficientCapacity):
                    self.unavailable.mark(create.spec.offer, create.spec.capacity, now, self.offer_unavailable_for)
                    self._end(session, row, "failed", now, f"no capacity: {error}", "no-capacity")
                    retry.append(create)
                elif isinstance(result, QuotaExceeded | AuthFailed):  # the whole account: try elsewhere
                    self.unavailable.mark_provider(create.spec.offer.provider, now)
                    self._end(session, row, "failed", now, f"provider refused: {error}", "provider-refused")
                    retry.append(create)
                elif isinstance(result, ProviderError) and result.retryable:
                    row.reason = f"create will be retried: {error}"
                    wait = result.retry_after if isinstance(result, RateLimited) and result.retry_after else 5.0
                    row.next_attempt_at = now + wait
                    self._event(session, now, row.tier, row.key, "create-retry", error)
                else:  # our request is wrong (configuration, bootstrap): retrying at once would only repeat it
                    self._end(session, row, "failed", now, f"create failed: {error}", "create-failed")
                    refused.setdefault(row.tier, error)
            for tier_name, error in refused.items():
                self._back_off(session, tier_name, now, error)
            session.commit()
            creates = self._replan(session, retry, tiers, now)
            session.commit()

    def _replan(
        self, session: Session, failed: list[_Create], tiers: Mapping[str, TierSpec], now: float
    ) -> list[_Create]:
        if not failed:
            return []
        by_tier = _group_by_tier(self.store.live_instances(session))
        replanned: list[_Create] = []
        for create in failed:
            name = create.row.tier
            planned = len(replanned)
            self._plan_creates(session, name, tiers[name], by_tier[name], 1, now, replanned, surge=create.row.surge)
            by_tier[name].extend(c.row for c in replanned[planned:])  # later placements see its spend
        return replanned

    def _retries(self, rows: list[InstanceRecord], tiers: Mapping[str, TierSpec], now: float) -> list[_Create]:
        """Pending rows with no instance yet (a crash between intent and answer, or a retryable error):
        ask again with the same key; the provider's idempotency makes this safe."""
        creates = []
        for row in rows:
            if row.state != "pending" or row.provider_id or (row.next_attempt_at or 0) > now:
                continue
            if row.tier not in tiers or row.provider not in self.providers:
                continue
            offer = next((o for o in self._cached_offers(tiers[row.tier]) if o.offer_id == row.offer_id), None)
            if offer is None:
                continue
            capacity = Capacity(row.capacity)
            spec = self._launch_spec(row.key, row.tier, tiers[row.tier], offer, capacity)
            creates.append(_Create(row, spec, placement.Placement(offer, capacity, row.price_per_hour, False)))
        return creates

    async def _drained(
        self, rows: list[InstanceRecord], tiers: Mapping[str, TierSpec], now: float
    ) -> list[InstanceRecord]:
        """Draining rows that may now be deleted: never served, drained to zero, or past the drain timeout."""
        draining = [r for r in rows if r.state == "draining" and (r.next_attempt_at or 0) <= now]
        ready_to_go = []
        checks = []
        for row in draining:
            tier = tiers.get(row.tier)
            timeout = tier.drain_timeout if tier is not None else 0.0
            if row.interrupted:  # warned of a reclaim: finish what runs, within the notice window
                timeout = min(timeout, NOTICE_DRAIN_MAX)
            if row.ready_at is None or self.drain_check is None or row.address is None:
                ready_to_go.append(row)
            elif now - (row.drain_started_at or now) >= timeout:
                row.reason = f"{row.reason}; drain timeout {timeout:g}s passed"
                ready_to_go.append(row)
            else:
                checks.append(row)
        if checks and self.drain_check is not None:
            drain_check = self.drain_check
            running = await asyncio.gather(*(self._call(drain_check(r)) for r in checks))
            for row, value in zip(checks, running, strict=True):
                if isinstance(value, int | float) and value <= 0:
                    ready_to_go.append(row)
        return ready_to_go

    async def _delete_rows(self, session: Session, rows: list[InstanceRecord], now: float) -> None:
        targets = [r for r in rows if r.provider_id and r.provider in self.providers]
        results = await asyncio.gather(
            *(self._call(self.providers[r.provider].delete(r.provider_id or "")) for r in targets)
        )
        for row, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, InstanceNotFound):
                wait = getattr(result, "retry_after", None) or 10.0
                row.next_attempt_at = now + wait
                self._event(session, now, row.tier, row.key, "delete-retry", _one_line(result))
                continue
            self._end(session, row, row.end_state or "terminated", now, row.reason, "retired")
        for row in rows:
            if not row.provider_id:  # nothing was ever created for it: just close the row
                self._end(session, row, row.end_state or "terminated", now, row.reason, "retired")

    async def _update_routes(self, session: Session, tiers: Mapping[str, TierSpec]) -> None:
        if self.route_update is None:
            return
        by_tier = _group_by_tier(self.store.live_instances(session))
        for name, tier in tiers.items():
            endpoints = sorted(r.address for r in by_tier[name] if r.state == "ready" and r.address)
            if self._routes.get(name) != endpoints:
                try:
                    await self.route_update(name, tier, endpoints)
                    self._routes[name] = endpoints
                except Exception as exc:
                    log.error("routing update for %s failed: %s", name, _one_line(exc))

    # ---- small pieces ----------------------------------------------------------------------------
    async def _call(self, awaitable: Awaitable[T]) -> T | BaseException:
        async with self._limit:
            try:
                return await awaitable
            except Exception as exc:
                return exc

    def _cached_offers(self, tier: TierSpec) -> list[Offer]:
        """The last good offers of the tier's providers, however old (stale offers beat none: a
        provider whose offers call fails this tick can still take creates)."""
        offers: list[Offer] = []
        for name in tier.providers:
            offers.extend(self.offer_cache.peek(name, tier.gpu, tier.gpu_count) or [])
        return offers

    async def refresh_offers(self, tiers: Mapping[str, TierSpec] | None = None) -> dict[str, str]:
        """Fetch offers for every (provider, GPU) the tiers use; the cache only asks when its TTL ran out."""
        tiers = tiers if tiers is not None else self.store.active_tiers()
        wanted = sorted({(p, t.gpu, t.gpu_count) for t in tiers.values() for p in t.providers if p in self.providers})
        results = await asyncio.gather(
            *(self._call(self.offer_cache.get(self.providers[p], GpuRequest(gpu=g, count=c))) for p, g, c in wanted)
        )
        return {want[0]: _one_line(r) for want, r in zip(wanted, results, strict=True) if isinstance(r, BaseException)}

    def _back_off(self, session: Session, tier: str, now: float, error: str) -> None:
        """Creates for this tier fail for a reason a retry cannot fix: wait 10 s, 20 s, … up to 10 min."""
        failures = self._create_backoff.get(tier, (0, 0.0))[0] + 1
        delay = min(CREATE_BACKOFF_MAX, CREATE_BACKOFF_FIRST * 2 ** (failures - 1))
        self._create_backoff[tier] = (failures, now + delay)
        self._event(
            session,
            now,
            tier,
            None,
            "create-backoff",
            f"{failures} failed create(s) in a row; next try in {delay:g}s: {error}",
        )

    def _note(self, session: Session, now: float, tier: str, kind: str, message: str) -> None:
        """An event that would repeat every tick while a condition lasts: once, then every 5 minutes."""
        last = self._notes.get((tier, kind))
        if last is not None and last[0] == message and now - last[1] < NOTE_EVERY:
            return
        self._notes[(tier, kind)] = (message, now)
        self._event(session, now, tier, None, kind, message)

    def _spot_backoff(self, tier: str, now: float) -> bool:
        times = self._interruptions[tier]
        while times and now - times[0] > SPOT_BACKOFF_WINDOW:
            times.popleft()
        return len(times) >= SPOT_BACKOFF_AFTER

    def _adopt(self, session: Session, row: InstanceRecord, inst: ProviderInstance, now: float) -> None:
        row.provider_id = inst.provider_id
        row.launched_at = row.launched_at or (inst.created_at or now)
        row.address = inst.address or row.address
        if inst.price_per_hour:
            row.price_per_hour = inst.price_per_hour
        row.next_attempt_at = None
        self._set_state(session, row, "provisioning", now, "launched", "launched")

    def _apply(self, session: Session, row: InstanceRecord, change: lifecycle.Transition, now: float) -> None:
        if change.address:
            row.address = change.address
        if change.interrupted:
            row.interrupted = True
            self._interruptions[row.tier].append(now)
        if change.state == "draining":
            self._start_draining(
                session,
                row,
                now,
                change.reason,
                interrupted=change.interrupted,
                end_state=change.end_state or "terminated",
                event=change.event,
            )
        elif change.state in ("terminated", "failed"):
            self._end(session, row, change.state, now, change.reason, change.event or "ended")
        elif change.state != row.state:
            self._set_state(session, row, change.state, now, change.reason, change.event)

    def _start_draining(
        self,
        session: Session,
        row: InstanceRecord,
        now: float,
        reason: str,
        *,
        interrupted: bool = False,
        end_state: str = "terminated",
        event: str | None = None,
    ) -> None:
        row.interrupted = row.interrupted or interrupted
        row.end_state = end_state
        row.drain_started_at = now
        self._set_state(session, row, "draining", now, reason, event or "draining")

    def _set_state(
        self, session: Session, row: InstanceRecord, state: str, now: float, reason: str, event: str | None
    ) -> None:
        if state == "ready" and row.ready_at is None:
            row.ready_at = now
        row.state, row.reason, row.updated_at = state, reason, now
        if event:
            self._event(session, now, row.tier, row.key, event, reason)

    def _end(self, session: Session, row: InstanceRecord, state: str, now: float, reason: str, event: str) -> None:
        row.ended_at = now
        row.cost = lifecycle.cost_of(row, now) if row.provider_id else 0.0
        self._set_state(session, row, state, now, reason, event)

    @staticmethod
    def _event(session: Session, now: float, tier: str | None, key: str | None, kind: str, message: str) -> None:
        session.add(EventRecord(t=now, tier=tier, instance_key=key, kind=kind, message=message[:2000]))
        log.info("%s %s %s: %s", tier or "-", key or "-", kind, message)

    def _record_decision(
        self,
        session: Session,
        name: str,
        now: float,
        current: int,
        desired: int,
        demand: float | None,
        reason: str,
        reading: TierReading,
    ) -> None:
        last = self._last_recorded.get(name)
        changed = last is None or last[0] != desired
        if not changed and last is not None and now - last[2] < RECORD_EVERY:
            return  # reasons carry elapsed times; record changes, and a sample a minute for history
        self._last_recorded[name] = (desired, reason, now)
        signals: dict[str, Any] = {k: v for k, v in reading.signals.to_dict().items() if v is not None}
        if reading.errors:
            signals["errors"] = dict(reading.errors)
        counts = getattr(self.signals, "error_counts", None)  # sources that count failures since start
        if callable(counts) and (tier_counts := counts(name)):
            signals["error_counts"] = dict(tier_counts)
        session.add(
            DecisionRecord(
                tier=name, t=now, current=current, desired=desired, demand=demand, reason=reason, signals=signals
            )
        )
        if changed:
            log.info("%s: %d → %d: %s", name, current, desired, reason)


def _group_by_tier(rows: Iterable[InstanceRecord]) -> defaultdict[str, list[InstanceRecord]]:
    by_tier: defaultdict[str, list[InstanceRecord]] = defaultdict(list)
    for row in rows:
        by_tier[row.tier].append(row)
    return by_tier


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]
