"""Phase 1, sync: what the providers say about our instances. Adopts instances created for stored
intents, applies lifecycle transitions (running, gone, interrupted, timed out), drains instances warned
by a webhook, and probes bootstrapping servers for readiness. Returns the listings for garbage collection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from scalectl.controller.reconciler import lifecycle
from scalectl.controller.reconciler.backoffs import CRASH_WITHIN, Backoffs
from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.controller.reconciler.tick import Tick
from scalectl.domain.failures import CRASH_BACKOFF
from scalectl.domain.instance import NOTICED, Instance, InstanceEvent, InstanceState
from scalectl.providers.base import Provider, ProviderInstance
from scalectl.providers.errors import InstanceNotFound
from scalectl.providers.stop_start import storage_price
from scalectl.tiers.config import TierSpec

S = InstanceState
ReadinessCheck = Callable[[TierSpec, Instance], Awaitable[tuple[bool, str]]]
Listings = dict[str, dict[str, ProviderInstance]]  # provider -> provider id -> instance (answered lists only)


class SyncPhase:
    def __init__(
        self,
        providers: Mapping[str, Provider],
        calls: Calls,
        backoffs: Backoffs,
        key_prefix: str,
        readiness: ReadinessCheck | None,
    ):
        self.providers = providers
        self.calls = calls
        self.backoffs = backoffs
        self.key_prefix = key_prefix
        self.readiness = readiness
        self._listed_at: dict[str, float] = {}  # provider -> when its last listing answered

    async def run(self, tick: Tick, instances: list[Instance], *, everywhere: bool = True) -> Listings:
        """``everywhere``: list every provider (garbage collection needs them all); else only those the
        tick's tiers and instances use (a daemon acting on some tiers only)."""
        used = (
            None
            if everywhere
            else {i.provider for i in instances} | {p for t in tick.tiers.values() for p in t.providers}
        )
        seen, by_key = await self._list(tick, self._to_list(tick, instances, used))
        confirmed = await self._confirm_missing(instances, seen)
        for inst in instances:
            self._sync_one(tick, inst, seen, by_key, confirmed)
        await self._probe_bootstrapping(tick, instances)
        return seen

    def _to_list(self, tick: Tick, instances: list[Instance], used: set[str] | None) -> list[str]:
        """Providers to list this tick: all, except one that polls less when idle (every instance of ours
        there is ready) and was listed less than its ``idle_list_every`` ago. Skipped means held, as if
        unreachable: nothing is adopted, ended or collected there this tick."""
        busy = {i.provider for i in instances if i.state is not S.READY or i.notice_at is not None}
        names = []
        for name in sorted(self.providers if used is None else used & set(self.providers)):
            every = self.providers[name].capabilities.idle_list_every
            last = self._listed_at.get(name)
            if every is None or name in busy or last is None or tick.now - last >= every:
                names.append(name)
        return names

    async def _list(self, tick: Tick, names: list[str]) -> tuple[Listings, dict[str, ProviderInstance]]:
        listings = await self.calls.gather(self.providers[n].list(self.key_prefix) for n in names)
        seen: Listings = {}
        by_key: dict[str, ProviderInstance] = {}
        for name, result in zip(names, listings, strict=True):
            if isinstance(result, BaseException):
                tick.report.provider_errors[name] = one_line(result)
                continue
            self._listed_at[name] = tick.now
            seen[name] = {i.provider_id: i for i in result}
            for listed in result:
                if listed.key and _keeps(listed, by_key.get(listed.key)):
                    by_key[listed.key] = listed
        return seen, by_key

    async def _confirm_missing(self, instances: list[Instance], seen: Listings) -> dict[str, ProviderInstance | None]:
        """Instances missing from their provider's listing: ask for each directly (gone, or just not
        listed). Key -> the instance, or None when the provider confirms it is not found."""
        missing = [
            i for i in instances if i.provider_id and i.provider in seen and i.provider_id not in seen[i.provider]
        ]
        answers = await self.calls.gather(self.providers[i.provider].get(i.provider_id or "") for i in missing)
        confirmed: dict[str, ProviderInstance | None] = {}
        for inst, answer in zip(missing, answers, strict=True):
            if isinstance(answer, InstanceNotFound):
                confirmed[inst.key] = None
            elif isinstance(answer, ProviderInstance):
                confirmed[inst.key] = answer
        return confirmed

    def _sync_one(
        self,
        tick: Tick,
        inst: Instance,
        seen: Listings,
        by_key: Mapping[str, ProviderInstance],
        confirmed: Mapping[str, ProviderInstance | None],
    ) -> None:
        tier, now = tick.tiers.get(inst.tier), tick.now
        if inst.provider_id is None:
            adopted = by_key.get(inst.key)
            if adopted is not None:
                tick.record(adopt(inst, adopted, now))
            elif inst.provider in seen and lifecycle.pending_expired(inst, tier, now):
                reason = "no instance appeared within the launch timeout"
                self._back_off(tick, inst, reason)  # a create that never yields a machine is retried slower
                tick.record(inst.end(S.FAILED, now, reason, "lost"))
            return
        if inst.provider not in seen:
            return  # provider unreachable this tick: hold
        found = seen[inst.provider].get(inst.provider_id) or confirmed.get(inst.key)
        gone = inst.key in confirmed and confirmed[inst.key] is None
        if gone and (held := self._within_lag(inst, now)) is not None:
            inst.reason = held  # not listed and not found yet: a fresh machine the provider does not show yet
            gone = False
        if (
            inst.notice_at is not None
            and inst.state in NOTICED
            and (found is None or found.interruption_notice_at is None)
        ):
            tick.record(inst.start_draining(now, "interruption notice (webhook)", interrupted=True))
            return
        provider = self.providers.get(inst.provider)
        ready = provider is not None and provider.capabilities.running_means_ready
        change = lifecycle.observe(inst, found, gone, tier, now, ready_on_running=ready)
        if change is not None:
            self._apply(tick, inst, change)

    def _within_lag(self, inst: Instance, now: float) -> str | None:
        """Why a machine its provider does not find is kept: made less than the provider's declared
        ``listing_lag`` ago (clouds list and get a new machine late; ending it would launch a second one
        beside it). None once the lag has passed: then not found is gone."""
        provider = self.providers.get(inst.provider)
        lag = provider.capabilities.listing_lag if provider is not None else 0.0
        made = inst.created_at  # the intent: the machine cannot be older
        if inst.launched_at is not None and inst.launched_at <= now:  # the create's answer (or the provider's own time)
            made = max(made, inst.launched_at)
        age = now - made
        if age >= lag:
            return None
        return (
            f"not found at the provider {age:.0f}s after its create: kept, as {inst.provider} may show a new "
            f"machine up to {lag:g}s late (its listing lag)"
        )

    def _apply(self, tick: Tick, inst: Instance, change: lifecycle.Transition) -> None:
        now = tick.now
        if change.address:
            inst.address = change.address
        if change.resumed:
            inst.resumed_at = now
        if change.interrupted:
            inst.mark_interrupted(now)
            self.backoffs.interrupted(inst.tier, now)
        if self._crashed(inst, change, now):
            self._back_off(tick, inst, change.reason)
        if change.state is S.DRAINING:
            end_state = change.end_state or S.TERMINATED
            tick.record(
                inst.start_draining(
                    now, change.reason, interrupted=change.interrupted, end_state=end_state, event=change.event
                )
            )
        elif change.state.is_ended:
            tick.record(inst.end(change.state, now, change.reason, change.event or "ended"))
        elif change.state != inst.state:
            reason = change.reason
            if change.state is S.STOPPED:
                reason = price_stopped(inst, self.providers.get(inst.provider), reason)
            tick.record(inst.move(change.state, now, reason, change.event))

    def _back_off(self, tick: Tick, inst: Instance, reason: str) -> None:
        """Skip the offer and hold the tier's creates, longer with every recent early failure; the event
        (with the reason) is what ``Backoffs.load`` rebuilds this from after a restart."""
        crashes, delay = self.backoffs.crashed(inst.tier, inst.provider, inst.offer_id, tick.now)
        message = (
            f"{crashes} early failure(s) lately; offer {inst.offer_id} at {inst.provider} skipped for a while, "
            f"creates wait {delay:g}s"
        )
        tick.event(inst.tier, inst.key, CRASH_BACKOFF, f"{message} ({reason})")

    @staticmethod
    def _crashed(inst: Instance, change: lifecycle.Transition, now: float) -> bool:
        """A machine that never started or a server that never became ready, or a machine lost soon after
        its launch: a crash loop in the making, which relaunching on the same offer every tick would only feed."""
        if change.event in ("launch-timeout", "bootstrap-timeout"):
            return True
        launched = inst.launched_at if inst.launched_at is not None else inst.created_at
        return change.event == "lost" and now - launched <= CRASH_WITHIN

    async def _probe_bootstrapping(self, tick: Tick, instances: list[Instance]) -> None:
        waiting = [i for i in instances if i.state is S.BOOTSTRAPPING and i.tier in tick.tiers]
        if not waiting:
            return
        if self.readiness is None:
            for inst in waiting:
                tick.record(inst.mark_ready(tick.now, "server up"))
            return
        readiness = self.readiness
        results = await self.calls.gather(readiness(tick.tiers[i.tier], i) for i in waiting)
        for inst, result in zip(waiting, results, strict=True):
            if isinstance(result, tuple) and result[0]:
                tick.record(inst.mark_ready(tick.now, result[1]))
            elif isinstance(result, tuple):
                inst.reason = f"waiting for readiness: {result[1]}"


def price_stopped(inst: Instance, provider: Provider | None, reason: str) -> str:
    """Set what the stopped machine bills an hour (its disk); where the provider publishes no single figure,
    0, and the reason says the ledger leaves the disk out."""
    price = storage_price(provider)
    inst.storage_per_hour = price if price is not None else 0.0
    if price is None:
        return f"{reason}; its disk's price is not known to scalectl: billed $0 while stopped"
    return reason


def _keeps(listed: ProviderInstance, held: ProviderInstance | None) -> bool:
    """Which of two instances under one key a row adopts: one not gone, then the oldest, then the lowest id
    (the same one every tick; garbage collection deletes the other)."""
    if held is None:
        return True

    def rank(i: ProviderInstance) -> tuple[bool, float, str]:
        return (i.status.is_gone, i.created_at if i.created_at is not None else float("inf"), i.provider_id)

    return rank(listed) < rank(held)


def adopt(inst: Instance, found: ProviderInstance, now: float) -> InstanceEvent:
    """The provider has an instance for our key: follow it (its price and address when it tells them)."""
    return inst.adopt(
        found.provider_id, now, created_at=found.created_at, address=found.address, price=found.price_per_hour
    )
