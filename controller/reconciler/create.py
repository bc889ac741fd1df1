"""Phase 5a, act on creates: store each planned create as an intent (an instance with its idempotency
key), and — after the tick has committed the intents — ask the providers, failing over to the next
offer on no-capacity or a refusing account, a bounded number of rounds per tick."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.controller.reconciler.offers import TierOffers
from scalectl.controller.reconciler.plan import Create, plan_creates
from scalectl.controller.reconciler.record import Recorder
from scalectl.controller.reconciler.sync import adopt
from scalectl.controller.reconciler.tick import Tick, by_tier
from scalectl.domain.instance import Instance, InstanceState
from scalectl.providers.base import Capacity, LaunchSpec, Offer, Provider, ProviderInstance
from scalectl.providers.errors import (
    AuthFailed,
    CreateUnconfirmed,
    InsufficientCapacity,
    ProviderError,
    QuotaExceeded,
    RateLimited,
)
from scalectl.providers.tagging import TIER_TAG
from scalectl.sizing.server import ServerDescription
from scalectl.tiers.config import TierSpec

ServerFor = Callable[[str, TierSpec], ServerDescription]  # what a tier's launches carry
MAX_PLACEMENT_ROUNDS = 3  # failover attempts within one tick after no-capacity answers
S = InstanceState


@dataclass
class PendingCreate:
    instance: Instance
    spec: LaunchSpec


class CreatePhase:
    def __init__(
        self,
        providers: Mapping[str, Provider],
        calls: Calls,
        backoffs: Backoffs,
        offers: TierOffers,
        recorder: Recorder,
        key_prefix: str,
        server_for: ServerFor | None,
    ):
        self.providers = providers
        self.calls = calls
        self.backoffs = backoffs
        self.offers = offers
        self.recorder = recorder
        self.key_prefix = key_prefix
        self.server_for = server_for

    def intent(self, tick: Tick, create: Create) -> PendingCreate:
        """The instance a planned create will be, added to the unit of work (stored at its next commit)."""
        name, chosen = create.tier, create.placement
        key = f"{self.key_prefix}{name}-{secrets.token_hex(4)}"[:63]
        inst = Instance(
            key=key,
            tier=name,
            state=S.PENDING,
            provider=chosen.offer.provider,
            offer_id=chosen.offer.offer_id,
            gpu=chosen.offer.gpu,
            gpu_count=chosen.offer.gpu_count,
            region=chosen.offer.region,
            capacity=chosen.capacity.value,
            price_per_hour=chosen.price_per_hour,
            reason=create.reason,
            created_at=tick.now,
            updated_at=tick.now,
            surge=create.surge,
            server_hash=tick.server_hashes.get(name),
            end_state=S.STOPPED if create.fill else S.TERMINATED,  # a pool fill: stopped once it has booted
        )
        tick.uow.instances.add(inst)
        return PendingCreate(inst, self.launch_spec(key, name, tick.tiers[name], chosen.offer, chosen.capacity))

    def retries(self, tick: Tick, instances: list[Instance]) -> list[PendingCreate]:
        """Pending instances with no provider instance yet (a crash between intent and answer, or a
        retryable error): ask again with the same key; the provider's idempotency makes this safe."""
        creates = []
        for inst in instances:
            if inst.state is not S.PENDING or inst.provider_id or (inst.next_attempt_at or 0) > tick.now:
                continue
            tier = tick.tiers.get(inst.tier)
            if tier is None or inst.provider not in self.providers:
                continue
            offer = next((o for o in self.offers.of(tier) if o.offer_id == inst.offer_id), None)
            if offer is None:
                continue
            creates.append(
                PendingCreate(inst, self.launch_spec(inst.key, inst.tier, tier, offer, Capacity(inst.capacity)))
            )
        return creates

    def launch_spec(self, key: str, name: str, tier: TierSpec, offer: Offer, capacity: Capacity) -> LaunchSpec:
        """What a create asks for; built the same way for a first try and for a retry with the same key."""
        # a variant's servers are tuned for its GPU, by the rule `scalectl vllm-args` uses
        server = self.server_for(name, tier.on(offer.gpu, offer.gpu_count)) if self.server_for else None
        return LaunchSpec(key=key, tier=name, offer=offer, capacity=capacity, tags={TIER_TAG: name}, server=server)

    async def run(self, tick: Tick, creates: list[PendingCreate]) -> None:
        """Create what was planned (its intents are committed); on no-capacity or a refusing account,
        mark the offer or provider unavailable and re-place on the next offer."""
        for _round in range(MAX_PLACEMENT_ROUNDS):
            if not creates:
                return
            results = await self.calls.gather(self.providers[c.spec.offer.provider].create(c.spec) for c in creates)
            retry: list[PendingCreate] = []
            refused: dict[str, str] = {}  # tier -> the first error that a retry cannot fix
            for create, result in zip(creates, results, strict=True):
                if self._answered(tick, create, result, refused):
                    retry.append(create)
            for tier_name, error in refused.items():
                failures, delay = self.backoffs.create_refused(tier_name, tick.now)
                message = f"{failures} failed create(s) in a row; next try in {delay:g}s: {error}"
                tick.event(tier_name, None, "create-backoff", message)
            await tick.db.run(tick.uow.commit)
            creates = await tick.db.run(self._replan, tick, retry)
            await tick.db.run(tick.uow.commit)  # the new intents, before the next round calls the providers

    def _answered(
        self, tick: Tick, create: PendingCreate, result: ProviderInstance | BaseException, refused: dict[str, str]
    ) -> bool:
        """Apply a create's answer; True when another offer should be tried in its place."""
        inst, now = create.instance, tick.now
        inst.attempts += 1
        if isinstance(result, ProviderInstance):
            tick.record(adopt(inst, result, now))
            self.backoffs.create_succeeded(inst.tier)
            return False
        error = one_line(result)
        if isinstance(result, CreateUnconfirmed):  # the provider may have made it: unknown, adopt
            inst.reason = f"create unconfirmed, adopted when listed: {error}"
            inst.next_attempt_at = max(now, result.settles_at)  # no second create before the listing can show it
            tick.event(inst.tier, inst.key, "create-unconfirmed", error)
            return False
        if isinstance(result, InsufficientCapacity):
            self.backoffs.no_capacity(create.spec.offer, create.spec.capacity, now)
            tick.record(inst.end(S.FAILED, now, f"no capacity: {error}", "no-capacity"))
            return True
        if isinstance(result, QuotaExceeded | AuthFailed):  # the whole account: try elsewhere
            self.backoffs.provider_refused(create.spec.offer.provider, now)
            tick.record(inst.end(S.FAILED, now, f"provider refused: {error}", "provider-refused"))
            return True
        if isinstance(result, ProviderError) and result.retryable:
            inst.reason = f"create will be retried: {error}"
            wait = result.retry_after if isinstance(result, RateLimited) and result.retry_after else 5.0
            inst.next_attempt_at = now + wait
            tick.event(inst.tier, inst.key, "create-retry", error)
            return False
        # our request is wrong (configuration, bootstrap): retrying at once would only repeat it
        tick.record(inst.end(S.FAILED, now, f"create failed: {error}", "create-failed"))
        refused.setdefault(inst.tier, error)
        return False

    def _replan(self, tick: Tick, failed: list[PendingCreate]) -> list[PendingCreate]:
        if not failed:
            return []
        grouped = by_tier(tick.uow.instances.live())
        replanned: list[PendingCreate] = []
        for create in failed:
            name = create.instance.tier
            tier = tick.tiers[name]
            offers, surge = self.offers.of(tier), create.instance.surge
            worth = tier.capacity_units(create.instance.gpu, create.instance.gpu_count)  # another variant may take it
            plan = plan_creates(
                name, tier, grouped[name], worth, offers, self.backoffs, tick.now, surge=surge, fleet=tick.fleet_budget
            )
            for note in plan.notes:
                self.recorder.note(tick, note.tier, note.kind, note.message)
            for planned in plan.creates:
                pending = self.intent(tick, planned)
                replanned.append(pending)
                grouped[name].append(pending.instance)  # later placements see its spend
        return replanned
