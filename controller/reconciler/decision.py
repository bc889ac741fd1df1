"""Phase 3, decide: read each tier's signals and run its policy (``PolicyRunner``) on them. Policy state
is loaded from the store once and saved when it changes, so a restart resumes the policy's timers: at once
when the decision's own parts change (the count, the conditions' timers, the window's needs), and what it
learned (capacity, boot and service times, which move every tick) at most every ``LEARNED_SAVE_EVERY``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from scalectl.clocks import Clock
from scalectl.controller.reconciler.calls import one_line
from scalectl.controller.reconciler.decide import PolicyRunner, bounds_for
from scalectl.controller.reconciler.tick import Tick
from scalectl.controller.store.repository import Store
from scalectl.domain.instance import Instance, InstanceState
from scalectl.policies.types import PolicyInput, PolicyState, Signals
from scalectl.sources.reading import SignalSource, TierReading
from scalectl.tiers.config import TierSpec

log = logging.getLogger("scalectl.reconciler")
# How stale a restart (or another daemon taking the tier over) may find what the policy learned. Those
# figures change every tick and move slowly (the capacity bins' half-life is 6 hours); a row write per
# tier per tick for them cost a fifth of a simulated day.
LEARNED_SAVE_EVERY = 30.0


def _decisive(state: PolicyState, desired: int) -> tuple[object, ...]:
    """What a restart must find as it was: the count and the conditions' timers."""
    return desired, state.since, state.last_change, state.last_desired, state.peaks


@dataclass(frozen=True)
class TierDecision:
    current: int
    desired: int
    reason: str
    demand: float | None


class DecidePhase:
    def __init__(self, store: Store, policy: PolicyRunner, signals: SignalSource, clock: Clock):
        self.store = store
        self.policy = policy
        self.signals = signals
        self.clock = clock
        self._states: dict[str, tuple[PolicyState, int]] = {}
        self._before: dict[str, tuple[PolicyState, int]] = {}  # this tick's starting state, per tier
        self._saved: dict[str, tuple[PolicyState, int, float]] = {}  # as last saved (or loaded), and when
        self._following: set[str] = set()

    def follow(self, tiers: Mapping[str, TierSpec], now: float) -> tuple[set[str], set[str]]:
        """The tiers this phase decides for, every tick. A tier new to it (the first tick, a tier applied,
        or one taken over from another daemon) resumes its policy state from the store. A tier it no longer
        decides for is forgotten, so taking it back later resumes from what its other owner stored meanwhile.
        Returns (new, gone) tier names."""
        new = {name: tiers[name] for name in tiers if name not in self._following}
        gone = self._following - set(tiers)
        for name in gone:
            self._states.pop(name, None)
            self._saved.pop(name, None)
            self.policy.forget(name)
        self._following = set(tiers)
        if not new:
            return set(), gone
        stored = self.store.policy.states()
        self._states.update({name: stored[name] for name in new if name in stored})
        self._saved.update({name: (*stored[name], now) for name in new if name in stored})
        return set(new), gone

    def state_of(self, name: str) -> PolicyState | None:
        """The tier's policy state as this tick's decision left it (None before its first): read, not kept."""
        held = self._states.get(name)
        return held[0] if held is not None else None

    async def read_signals(
        self, tiers: Mapping[str, TierSpec], by_tier: Mapping[str, list[Instance]]
    ) -> dict[str, TierReading]:
        names = list(tiers)
        serving = (InstanceState.READY, InstanceState.DRAINING)
        endpoints = [[i.address for i in by_tier.get(n, []) if i.state in serving and i.address] for n in names]
        results = await asyncio.gather(
            *(self.signals.read(n, tiers[n].signals, eps) for n, eps in zip(names, endpoints, strict=True)),
            return_exceptions=True,
        )
        readings: dict[str, TierReading] = {}
        now = self.clock.now()
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):  # a source must not raise; if one does, it is unknown
                result = TierReading(Signals(), now, {"signals": one_line(result)})
            readings[name] = result
        return readings

    def decide(
        self,
        tick: Tick,
        name: str,
        tier: TierSpec,
        counted: list[Instance],
        reading: TierReading,
        price: float | None,
        *,
        replacing: int = 0,
        units: float | None = None,
        booting_units: float = 0.0,
    ) -> TierDecision:
        """``price``: $/hour of one more instance (``plan.instance_price``), what the budget cap divides by.
        ``replacing``: warned instances not replaced yet. They no longer count toward the tier, but the
        policy sees the fleet as it was, so holding means replacing them now, not after its scale-out window.
        ``units``: a tier with variants, its counted and replacing instances in primary units; the policy
        sees them rounded to whole instances (the reconciler applies its change to the exact figure), and
        ``booting_units`` (those not serving yet) likewise, never more than the whole."""
        current = len(counted) + replacing if units is None else round(units)
        state, last_desired = self._states.get(name, (PolicyState(), current))
        self._before[name] = (state, last_desired)
        try:
            booting = sum(1 for i in counted if i.state is not InstanceState.READY)
            if units is not None:  # eight small instances booting are not eight of the policy's instances
                booting = min(current, round(booting_units))
            # The policy's clock is the reading's: the arrivals it counts ran to the read, and a tick whose
            # reads took longer than the last one's (a slow scrape) would read as a burst on the tick's clock.
            at = reading.read_at
            inp = PolicyInput(at, reading.signals, current, state, booting=booting)
            bounds = replace(bounds_for(tier), price_per_instance_hour=price)
            decision = self.policy.decide(name, tier, inp, bounds)
            desired, reason, new_state, demand = decision.desired, decision.reason, decision.state, decision.demand
        except Exception as exc:  # a policy bug must not take the fleet down: hold, and say why
            log.exception("policy for tier %s failed", name)
            desired, reason, new_state, demand = current, f"policy error, holding: {one_line(exc)}", state, None
        self._states[name] = (new_state, desired)
        self._save(tick, name, new_state, desired)
        return TierDecision(current, desired, reason, demand)

    def _save(self, tick: Tick, name: str, state: PolicyState, desired: int) -> None:
        saved = self._saved.get(name)
        if saved is not None:
            saved_state, saved_desired, at = saved
            if (saved_state, saved_desired) == (state, desired):
                return
            if (
                _decisive(saved_state, saved_desired) == _decisive(state, desired)
                and tick.now - at < LEARNED_SAVE_EVERY
            ):
                return
        tick.uow.save_policy_state(name, state, desired, tick.now)
        self._saved[name] = (state, desired, tick.now)

    def stored_desired(self, name: str) -> int | None:
        """The tier's desired count as last decided (or resumed from the store); None for a tier never decided."""
        held = self._states.get(name)
        return None if held is None else held[1]

    def last_desired(self, name: str, default: int) -> int:
        """The count this tick started from: the last tick's desired (``default`` for a tier never decided)."""
        return self._before.get(name, (None, default))[1]

    def pin(self, tick: Tick, name: str, decision: TierDecision, count: int, reason: str) -> TierDecision:
        """Set the tier's desired count to ``count`` whatever the policy said (a capacity shortage, an
        operator's override or pause), and keep it as the policy's last desired count, so the policy does not
        see a change it never made (its windows would restart, and desired would flap between what it wants
        and what it gets)."""
        state, _ = self._states[name]
        before, last_desired = self._before.get(name, (state, count))
        last_change = before.last_change if last_desired == count else tick.now
        held = replace(state, last_desired=count, last_change=last_change)
        self._states[name] = (held, count)
        self._save(tick, name, held, count)
        return replace(decision, desired=count, reason=reason)

    def hold_at(self, tick: Tick, name: str, decision: TierDecision, allowed: int, why: str) -> TierDecision:
        """Capacity is short: the tier can reach only ``allowed`` this tick. Hold that, and say so."""
        if allowed >= decision.desired:
            return decision
        reason = f"{decision.reason}; capacity allows {allowed} ({why}) → hold {allowed}"
        return self.pin(tick, name, decision, allowed, reason)
