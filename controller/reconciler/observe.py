"""Observe-only ticks (`scalectl daemon --observe`): read the signals, run each tier's policy and the
operator's controls, record every decision, and call no provider at all — no create or delete, and no list
or offers either: nothing of ours runs, so there is no fleet to read. The policy sees a shadow fleet: the
count it last decided, as if every decision had been obeyed at once (a tier starts at its min). That is what
`scalectl report` prices: what the tiers would have run, beside what the existing autoscaler ran."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from scalectl.controller.reconciler.report import TickReport, TierTick
from scalectl.controller.reconciler.tick import Tick
from scalectl.sources.reading import TierReading
from scalectl.tiers.config import TierSpec

if TYPE_CHECKING:
    from scalectl.controller.ha.shards import TickScope
    from scalectl.controller.reconciler.loop import Reconciler

OBSERVE = "observe-only"  # the head of every reason an observing daemon records


async def observe_tick(r: Reconciler, scope: TickScope | None = None) -> TickReport:
    now = r.clock.now()
    report = TickReport(t=now)
    db = r.db.run
    fleet = await db(r.store.config.fleet_config)
    configured = dict(fleet.tiers) if fleet is not None else {}
    tiers = configured if scope is None else {n: t for n, t in configured.items() if scope.owns(n)}
    await db(r.decide.follow, tiers, now)
    readings = await r.decide.read_signals(tiers, {})  # no instances of ours: sources that need none
    uow = await db(r.store.unit_of_work().__enter__)
    try:
        tick = Tick(now, tiers, uow, report, db=r.db)
        await db(_decide_all, r, tick, tiers, readings)
        await db(uow.commit)
    finally:
        await db(uow.__exit__, None, None, None)
    return report


def _decide_all(r: Reconciler, tick: Tick, tiers: Mapping[str, TierSpec], readings: Mapping[str, TierReading]) -> None:
    r.controls.refresh()
    for name, tier in tiers.items():
        reading = readings[name]
        shadow = r.decide.stored_desired(name)
        shadow = tier.min if shadow is None else shadow
        price = tier.catalogue_price_per_hour()  # no offers are read: the catalogue prices the budget cap
        # The shadow fleet is all counted, none booting: ``replacing`` adds it to the policy's current count.
        decision = r.decide.decide(tick, name, tier, [], reading, price, replacing=shadow)
        decision = r.controls.apply(tick, name, tier, decision, price)
        decision = replace(decision, reason=f"{OBSERVE}: {decision.reason}")
        r.recorder.decision(tick, name, decision, reading)
        tick.report.tiers[name] = TierTick(
            name, decision.current, decision.desired, decision.reason, 0, signals=reading.signals, errors=reading.errors
        )
