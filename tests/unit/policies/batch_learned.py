"""A batch tier's learned state for tests: workers whose task time and slots are known, boots measured."""

from __future__ import annotations

from dataclasses import replace

from scalectl.policies.types import Bounds
from tests.unit.policies.helpers import Runner, spec

POLICY = spec(kind="scale-to-zero", max_wait="10m", queue_per_instance=20)
MU = 8 / 90  # tasks per instance-second: 8 slots, 90 s per task


def learned_runner() -> Runner:
    """Four busy workers, 8 tasks each, 90 s per task, for two hours with a few tasks always waiting; then
    the queue empties (its clock stops) while they finish what they run."""
    run = Runner(POLICY, bounds=Bounds(min=0, max=64), current=4)
    for t in range(0, 7200, 30):
        run.tick(t, current=4, queue_depth=8, in_flight=32, arrivals=4 * MU * 30)
    run.tick(7200, current=4, queue_depth=0, in_flight=32, arrivals=4 * MU * 30 - 8)
    return run


def measured_boots(run: Runner, *seconds: float) -> Runner:
    """The runner with these create→ready times measured (three or more count)."""
    run.state = replace(run.state, learned={**run.state.learned, **{f"boot.s.{i}": b for i, b in enumerate(seconds)}})
    return run
