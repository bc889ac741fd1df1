"""A tiny driver for policy tests: ticks at explicit offsets from T0, current follows desired."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from scalectl.policies.engine import decide
from scalectl.policies.external import ExternalPolicyLike
from scalectl.policies.spec import PolicySpec
from scalectl.policies.types import Bounds, Decision, PolicyInput, PolicyState, Signals

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z

_SPEC = TypeAdapter(PolicySpec)


def spec(**fields: Any) -> PolicySpec:
    """A validated policy spec from tiers.yaml-style fields (durations as "30s", "5m")."""
    return _SPEC.validate_python(fields)


class Runner:
    def __init__(
        self,
        policy: PolicySpec,
        bounds: Bounds | None = None,
        current: int = 0,
        external: ExternalPolicyLike | None = None,
        start: float = T0,
        compute_prior: float | None = None,
    ):
        self.policy = policy
        self.compute_prior = compute_prior
        self.bounds = bounds or Bounds(min=0, max=100)
        self.current = current
        self.state = PolicyState()
        self.external = external
        self.start = start
        self.decisions: list[Decision] = []

    def tick(
        self,
        at: float,
        current: int | None = None,
        booting: int = 0,
        **signals: float | None,
    ) -> Decision:
        """Decide at ``start + at`` seconds; the decision takes effect at once (current = desired)."""
        inp = PolicyInput(
            now=self.start + at,
            signals=Signals(**signals),
            current=self.current if current is None else current,
            state=self.state,
            booting=booting,
            compute_prior=self.compute_prior,
        )
        decision = decide(self.policy, inp, self.bounds, self.external)
        self.state = decision.state
        self.current = decision.desired
        self.decisions.append(decision)
        return decision

    def ticks(self, start: float, stop: float, step: float, **signals: float | None) -> Decision:
        """Tick every ``step`` seconds over [start, stop] with the same signals; returns the last decision."""
        at = start
        decision = None
        while at <= stop:
            decision = self.tick(at, **signals)  # type: ignore[arg-type]
            at += step
        assert decision is not None
        return decision
