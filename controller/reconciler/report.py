"""What one tick saw and did (returned for logs, metrics, tests and the simulator)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scalectl.policies.types import Signals


@dataclass
class TierTick:
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
