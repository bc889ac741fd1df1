"""The state of one tick that every phase shares: its time, the tiers, the unit of work and the report.
Phases take a ``Tick`` instead of threading a session and ``now`` through every call."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scalectl.controller.reconciler.fleet_budget import FleetBudget
from scalectl.controller.reconciler.report import TickReport
from scalectl.controller.reconciler.rollout import RolloutControl
from scalectl.controller.store.off_loop import StoreCalls
from scalectl.controller.store.unit_of_work import UnitOfWork
from scalectl.domain.instance import Instance, InstanceEvent
from scalectl.tiers.config import TierSpec


@dataclass
class Tick:
    now: float
    tiers: Mapping[str, TierSpec]
    uow: UnitOfWork
    report: TickReport
    db: StoreCalls = field(default_factory=StoreCalls.inline)  # runs the phases' store work (off the loop)
    removed: Mapping[str, TierSpec] = field(default_factory=dict)  # tiers gone from the config, still draining
    fleet_budget: FleetBudget = field(default_factory=lambda: FleetBudget(None, 0.0))
    server_hashes: dict[str, str] = field(default_factory=dict)  # tier -> the server its instances should run
    rollout_controls: Mapping[str, RolloutControl] = field(default_factory=dict)  # `scalectl rollout` settings

    def record(self, event: InstanceEvent | None) -> None:
        self.uow.record(event)

    def event(self, tier: str | None, key: str | None, kind: str, message: str) -> None:
        self.uow.record(InstanceEvent(self.now, tier, key, kind, message))


def by_tier(instances: Iterable[Instance]) -> defaultdict[str, list[Instance]]:
    grouped: defaultdict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        grouped[inst.tier].append(inst)
    return grouped
