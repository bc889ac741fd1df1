"""Scale-to-zero policy for batch tiers: nothing while idle, ceil(depth / per-instance) once work waits.

Conditions (each with a clock in ``PolicyState.since``):

- ``queue_over``: queue depth > queue_per_instance × current (at 0 instances: any waiting task).
  Held for ``activate_after`` → scale out to max(1, ceil(depth / qpi)); the clock restarts, so each
  further step out needs another ``activate_after`` of backlog.
- ``idle``: queue depth = 0 and nothing in flight (both known). Needed, for ``idle_after``, to reach 0.
- ``under``: ceil((depth + in_flight) / qpi) < current (both known). Held for ``idle_after`` → shrink to
  ceil(peak (depth + in_flight) / qpi) over that window. In-flight tasks keep their instances: the
  scale-in target counts them, so it is never below what the running work occupies.

Never 0 while tasks are in flight. A missing signal holds: no scale-in, never to zero.

With ``max_wait`` set, bursts are sized to start every task within it and idle workers retire promptly
(policies/batch.py); these rules size the first burst, before the throughput per instance is learned.
There a trickle is served in rounds: the tier may go to 0 while the last worker finishes its tasks.
"""

from __future__ import annotations

from scalectl.policies import batch
from scalectl.policies.common import ceil_count, dur, num
from scalectl.policies.spec import ScaleToZeroPolicy
from scalectl.policies.types import Decision, PolicyInput, PolicyState

QUEUE_OVER = "queue_over"
IDLE = "idle"
UNDER = "under"


def decide(spec: ScaleToZeroPolicy, inp: PolicyInput) -> Decision:
    if spec.max_wait is not None:
        inp = batch.learn(inp)
        sized = batch.decide(spec, inp)
        if sized is not None:  # may be 0 with tasks in flight: a drained worker finishes them (batch.py)
            return sized
    now, current = inp.now, inp.current
    depth, in_flight = inp.signals.queue_depth, inp.signals.in_flight
    qpi = spec.queue_per_instance

    over = depth is not None and depth > qpi * current
    idle = depth == 0 and in_flight == 0
    load = None if depth is None or in_flight is None else depth + in_flight
    under = load is not None and ceil_count(load / qpi) < current
    state = (
        inp.state.with_condition(QUEUE_OVER, over, now)
        .with_condition(IDLE, idle, now)
        .with_condition(UNDER, under, now)
        .with_peak(UNDER, load if under else None)
    )
    demand = None if depth is None else ceil_count((load if load is not None else depth) / qpi)

    if over:
        assert depth is not None
        held = state.held_for(QUEUE_OVER, now)
        text = f"queue {num(depth)} > {num(qpi)} × {current} for {dur(held)}"
        if held >= spec.activate_after:
            target = max(1, ceil_count(depth / qpi))
            return Decision(target, f"{text} → {target}", state.restart(QUEUE_OVER, now), demand)
        return _floor_in_flight(
            Decision(current, f"{text} (scale out after {dur(spec.activate_after)}) → hold {current}", state, demand),
            in_flight,
        )

    unknown = [name for name, value in (("queue_depth", depth), ("in_flight", in_flight)) if value is None]
    if unknown:
        reason = f"{' and '.join(unknown)} unknown (no scale-in on missing data) → hold {current}"
        return _floor_in_flight(Decision(current, reason, state, demand), in_flight)

    assert depth is not None and in_flight is not None and load is not None
    if under:
        return _scale_in(spec, inp, state, demand, depth, in_flight)
    reason = f"queue {num(depth)}, {num(in_flight)} in flight: {current} enough → hold {current}"
    return _floor_in_flight(Decision(current, reason, state, demand), in_flight)


def _scale_in(
    spec: ScaleToZeroPolicy,
    inp: PolicyInput,
    state: PolicyState,
    demand: int | None,
    depth: float,
    in_flight: float,
) -> Decision:
    now, current = inp.now, inp.current
    peak = state.peaks.get(UNDER, depth + in_flight)
    target = ceil_count(peak / spec.queue_per_instance)
    # Zero is timed by ``idle`` (queue empty *and* nothing in flight); a peak of 0 means it held throughout.
    held = state.held_for(IDLE if target == 0 else UNDER, now)
    if target == 0:
        text = f"queue 0 and nothing in flight for {dur(held)}"
        wait = f"(scale to zero after {dur(spec.idle_after)})"
    else:
        text = f"queue {num(depth)} + {num(in_flight)} in flight fit {target} for {dur(held)}"
        if peak != depth + in_flight:
            text += f" (peak {num(peak)})"
        wait = f"(scale in after {dur(spec.idle_after)})"
    if held < spec.idle_after:
        return _floor_in_flight(Decision(current, f"{text} {wait} → hold {current}", state, demand), in_flight)
    state = state.restart(UNDER, now).with_peak(UNDER, depth + in_flight)
    return Decision(target, f"{text} → {target}", state, demand)


def _floor_in_flight(decision: Decision, in_flight: float | None) -> Decision:
    """Tasks in flight need somewhere to run: never 0 while any are."""
    if decision.desired == 0 and in_flight is not None and in_flight > 0:
        reason = f"{decision.reason.rsplit(' → ', 1)[0]}; {num(in_flight)} in flight → 1"
        return Decision(1, reason, decision.state, decision.demand)
    return decision
