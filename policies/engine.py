"""One entry point for every policy: dispatch by kind, clamp to the tier's limits, record the change."""

from __future__ import annotations

from dataclasses import replace

from policies import min_floor, predictive, scale_to_zero
from policies.clamp import clamp
from policies.external import ExternalPolicyLike, run_external
from policies.spec import ExternalPolicy, MinFloorPolicy, PolicySpec, PredictivePolicy, ScaleToZeroPolicy
from policies.types import Bounds, Decision, PolicyInput


def _propose(spec: PolicySpec, inp: PolicyInput, external: ExternalPolicyLike | None) -> Decision:
    if isinstance(spec, MinFloorPolicy):
        return min_floor.decide(spec, inp)
    if isinstance(spec, ScaleToZeroPolicy):
        return scale_to_zero.decide(spec, inp)
    if isinstance(spec, PredictivePolicy):
        return predictive.decide(spec, inp)
    if isinstance(spec, ExternalPolicy):
        if external is None:
            raise ValueError(
                f"policy {spec.class_!r} is external: load it once with load_external_policy() and pass it in"
            )
        return run_external(external, inp)
    raise TypeError(f"unknown policy spec {type(spec).__name__}")


def decide(spec: PolicySpec, inp: PolicyInput, bounds: Bounds, external: ExternalPolicyLike | None = None) -> Decision:
    """The tier's desired count for this tick, with a reason a person can read and the next state."""
    proposal = _propose(spec, inp, external)
    desired, notes = clamp(proposal.desired, bounds)
    reason = proposal.reason
    if notes:
        reason = f"{reason}; {'; '.join(notes)} → {desired}"
    previous = inp.state.last_desired if inp.state.last_desired is not None else inp.current
    state = proposal.state
    if desired != previous:
        state = replace(state, last_change=inp.now)
    state = replace(state, last_desired=desired)
    return Decision(desired, reason, state, proposal.demand)
