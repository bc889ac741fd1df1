"""When the policy state reaches the store: a change to the decision's own parts (the count, the
conditions' timers, the window's needs) at once; figures that only learned something at most every
``LEARNED_SAVE_EVERY`` seconds, so a restart finds them that fresh."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scalectl.controller.reconciler.decision import LEARNED_SAVE_EVERY
from scalectl.policies.types import Bounds, Decision, PolicyInput
from tests.unit.reconciler.conftest import World


class Learning:
    """A policy that learns something every tick (a counter) and wants ``desired`` instances."""

    def __init__(self) -> None:
        self.desired = 0
        self.ticks = 0

    def __call__(self, spec: Any, inp: PolicyInput, bounds: Bounds, external: Any) -> Decision:
        if getattr(spec, "kind", "") != "min-floor":
            return Decision(desired=inp.current, reason="hold", state=inp.state)
        self.ticks += 1
        state = replace(inp.state, learned={**inp.state.learned, "seen": float(self.ticks)})
        return Decision(desired=self.desired, reason=f"want {self.desired}", state=state)


def _stored(w: World) -> tuple[float | None, int]:
    state, desired = w.store.policy.states()["web"]
    return state.learned.get("seen"), desired


async def test_learned_figures_are_saved_every_30_s_and_a_new_count_at_once(make_world) -> None:
    w: World = make_world()
    policy = Learning()
    w.reconciler.decide.policy._decide = policy  # type: ignore[assignment]  # the runner calls it
    await w.run()  # the first tick saves (nothing stored yet)
    assert _stored(w) == (1.0, 0)
    ticks = int(LEARNED_SAVE_EVERY // 5)
    await w.run(ticks - 1)  # 5 … 25 s later: only the counter moved
    assert _stored(w) == (1.0, 0)
    await w.run()  # 30 s after the last save
    assert _stored(w) == (float(ticks + 1), 0)
    policy.desired = 1  # a decision: stored in the tick it is made, learned figures with it
    await w.run()
    assert _stored(w) == (float(ticks + 2), 1)
