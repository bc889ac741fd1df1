"""One entry point for every policy: dispatch by kind, clamp to the tier's limits, record the change."""

from __future__ import annotations

from dataclasses import replace

from scalectl.policies import boot
from scalectl.policies.clamp import clamp
from scalectl.policies.external import ExternalPolicyLike, run_external
from scalectl.policies.registry import kind_of
from scalectl.policies.spec import PolicySpec
from scalectl.policies.types import Bounds, Decision, PolicyInput


def _propose(spec: PolicySpec, inp: PolicyInput, external: ExternalPolicyLike | None) -> Decision:
    kind = kind_of(spec)
    if kind.decide is not None:
        return kind.decide(spec, inp)
    if external is None:
        name = getattr(spec, "class_", "")
        raise ValueError(f"policy {name!r} is external: load it once with load_external_policy() and pass it in")
    return run_external(external, inp)


def decide(spec: PolicySpec, inp: PolicyInput, bounds: Bounds, external: ExternalPolicyLike | None = None) -> Decision:
    """The tier's desired count for this tick, with a reason a person can read and the next state."""
    if inp.boot_time is None:  # nothing measured from the instance rows: the policy's own measurement
        inp = replace(inp, boot_time=boot.boot_time(inp.state.learned))
    proposal = _propose(spec, inp, external)
    desired, notes = clamp(proposal.desired, bounds)
    reason = proposal.reason
    if notes:
        reason = f"{reason}; {'; '.join(notes)} → {desired}"
    previous = inp.state.last_desired if inp.state.last_desired is not None else inp.current
    state = proposal.state
    if desired != previous:
        state = replace(state, last_change=inp.now)
    ready = inp.current - inp.booting
    learned = boot.observe(state.learned, now=inp.now, ready=ready, current=inp.current, desired=desired)
    state = replace(state, last_desired=desired, learned=learned)
    return Decision(desired, reason, state, proposal.demand)
