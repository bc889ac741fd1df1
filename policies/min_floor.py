"""Minimum-floor policy: a warm floor, and the decision core above it (policies/target.py; with a floor of 0
the same core is the reactive part of the predictive policy)."""

from __future__ import annotations

from scalectl.policies import target as target_mode
from scalectl.policies.spec import MinFloorPolicy
from scalectl.policies.types import Decision, PolicyInput


def decide(spec: MinFloorPolicy, inp: PolicyInput) -> Decision:
    return target_mode.evaluate(spec, spec.floor, inp)
