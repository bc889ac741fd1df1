"""What a signal source hands the reconciler for one tier on one tick."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scalectl.policies.types import Signals
from scalectl.sources.spec import SignalsSpec


@dataclass(frozen=True, slots=True)
class TierReading:
    """Signals for one tier (None = unknown), when they were read, and what failed, per source."""

    signals: Signals
    read_at: float
    errors: Mapping[str, str] = field(default_factory=dict)  # source name -> one-line error (no secrets)
    sources: Mapping[str, str] = field(default_factory=dict)  # figure name -> source it came from


class SignalSource(Protocol):
    """Reads a tier's signals. The daemon's implementation talks to brokers and /metrics; the
    simulator's reads its model. Must never raise for a source failure: report it in ``errors``."""

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading: ...

    async def aclose(self) -> None: ...
