"""The policy kinds, in one place: each kind's spec class, how it decides, and what it keeps between ticks.

The engine dispatches through this table and configuration errors name the kinds from it — so a new kind is
one entry here (and its spec in
policies/spec.py's ``PolicySpec`` union), not an edit in every module that lists kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scalectl.policies import min_floor, predictive, scale_to_zero
from scalectl.policies.spec import (
    ExternalPolicy,
    MinFloorPolicy,
    PredictivePolicy,
    ScaleToZeroPolicy,
)
from scalectl.policies.types import Decision, PolicyInput


@dataclass(frozen=True, slots=True)
class PolicyKind:
    name: str  # the `kind:` value in tiers.yaml
    spec: type[Any]
    # Built-in kinds decide from (spec, input); an external kind needs its loaded object (policies.external).
    decide: Callable[[Any, PolicyInput], Decision] | None

    @property
    def external(self) -> bool:
        return self.decide is None


KINDS: dict[str, PolicyKind] = {
    kind.name: kind
    for kind in (
        PolicyKind("min-floor", MinFloorPolicy, min_floor.decide),
        PolicyKind("scale-to-zero", ScaleToZeroPolicy, scale_to_zero.decide),
        PolicyKind("predictive", PredictivePolicy, predictive.decide),
        PolicyKind("external", ExternalPolicy, None),
    )
}


def kind_of(spec: Any) -> PolicyKind:
    kind = KINDS.get(getattr(spec, "kind", None) or "")
    if kind is None or not isinstance(spec, kind.spec):
        raise TypeError(f"unknown policy spec {type(spec).__name__}")
    return kind
