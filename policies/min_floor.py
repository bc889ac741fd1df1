"""Minimum-floor policy: a warm floor, and either the decision core (``mode: target``, the default:
policies/target.py) or the threshold rules below (``mode: thresholds``).

The same rules, with a floor of 0, are the reactive part of the predictive policy (``evaluate``).

The threshold rules:

Conditions (each with a clock in ``PolicyState.since``):

- ``queue_over``: queue depth > queue_per_instance × current (current 0 with depth > 0 counts).
- ``ttft_over``: TTFT p95 > ttft_max (only when ttft_max is set).
- ``below``: every configured signal is known, TTFT is not over, and the queue fits fewer instances
  (ceil(depth / qpi) < current). While it holds, the peak queue depth (and the peak work in flight) is
  kept; scale-in sizes for those peaks, so one quiet sample cannot empty the tier. A queue that fits
  exactly ``current`` holds (a dead band against flapping).

The queue only measures work *beyond* what the instances are serving: a well-sized fleet reads 0. So
scale-in must also keep the instances the work in flight needs: with ``in_flight_per_instance`` set it
keeps ceil(peak in flight / in_flight_per_instance), removing at most half the fleet per window;
without it, it steps down ``scale_in_step`` (default 1) instance per window and lets the latency and
queue rules catch an overshoot.

Scale-out fires when an over-condition has held for ``scale_out_after``: to ceil(depth / qpi), at least
current + 1. Its clock then restarts, so the next step needs another ``scale_out_after`` (new instances
take minutes to serve; without this a lingering TTFT breach would add one per tick).
Scale-in fires when ``below`` has held for ``scale_in_after`` and nothing changed within ``cooldown``:
to max(floor, ceil(peak depth / qpi)). The ``below`` clock then restarts.
"""

from __future__ import annotations

from scalectl.policies import target as target_mode
from scalectl.policies.common import ceil_count, dur, latency, num
from scalectl.policies.spec import MinFloorPolicy, ReactiveRules
from scalectl.policies.types import Decision, PolicyInput, PolicyState

QUEUE_OVER = "queue_over"
TTFT_OVER = "ttft_over"
BELOW = "below"
IN_FLIGHT = "in_flight"


def in_flight_of(inp: PolicyInput) -> float | None:
    """Work being served now: vLLM's running requests, else the queue's in-flight (unacked) tasks."""
    signals = inp.signals
    return signals.requests_running if signals.requests_running is not None else signals.in_flight


def _no_requests(inp: PolicyInput) -> bool:
    """Known to be idle: vLLM reports nothing running or waiting and nothing arrived (all three read)."""
    s = inp.signals
    return s.requests_running == 0 and s.requests_waiting == 0 and s.arrivals == 0


def decide(spec: MinFloorPolicy, inp: PolicyInput) -> Decision:
    if spec.mode == "target":
        return target_mode.evaluate(spec, spec.floor, inp)
    return evaluate(spec, spec.floor, inp)


def evaluate(
    rules: MinFloorPolicy | ReactiveRules,
    floor: int,
    inp: PolicyInput,
    *,
    scale_in_blocked_by: str | None = None,
) -> Decision:
    """Apply the min-floor rules. ``scale_in_blocked_by`` (a reason) keeps the ``below`` clock stopped,
    used by the predictive policy while its plan holds the count up."""
    now, current, signals = inp.now, inp.current, inp.signals
    qpi = rules.queue_per_instance
    depth = signals.queue_depth
    p95 = signals.ttft_p95_s
    unknown: list[str] = []

    queue_over: bool | None = None
    queue_fits_fewer = False
    queue_text = ""
    if depth is None:
        unknown.append("queue_depth")
    else:
        queue_over = depth > qpi * current
        need = ceil_count(depth / qpi)
        queue_fits_fewer = need < current
        if queue_fits_fewer:  # the dead band in between (fits exactly `current`) holds: no flapping
            queue_text = f"queue {num(depth)} ≤ {num(qpi)} × {need}" if need else "queue 0"
        else:
            queue_text = f"queue {num(depth)} {'>' if queue_over else '≤'} {num(qpi)} × {current}"

    ttft_over: bool | None = None
    ttft_text = ""
    if rules.ttft_max is not None:
        if p95 is None and _no_requests(inp):  # an idle engine records no TTFT: nothing breaches, nothing is missing
            ttft_over, ttft_text = False, "no requests (no TTFT)"
        elif p95 is None:
            unknown.append("ttft_p95_s")
        else:
            ttft_over = p95 > rules.ttft_max
            ttft_text = f"TTFT p95 {latency(p95)} {'>' if ttft_over else '≤'} {latency(rules.ttft_max)}"

    running = in_flight_of(inp)
    per_instance = rules.in_flight_per_instance
    if per_instance is not None and running is None:
        unknown.append("in-flight work")

    below = queue_fits_fewer and ttft_over is not True and not unknown and scale_in_blocked_by is None
    state = (
        inp.state.with_condition(QUEUE_OVER, queue_over is True, now)
        .with_condition(TTFT_OVER, ttft_over is True, now)
        .with_condition(BELOW, below, now)
        .with_peak(BELOW, depth if below else None)
        .with_peak(IN_FLIGHT, running if below else None)
    )
    demand = None if depth is None else ceil_count(depth / qpi)
    if demand is not None and per_instance is not None and running is not None:
        demand = max(demand, ceil_count(running / per_instance))

    # Scale out: fast, on whichever known signal is over its threshold; unknown ones do not block it.
    fired: list[str] = []
    waiting: list[str] = []
    for name, over, text in ((QUEUE_OVER, queue_over, queue_text), (TTFT_OVER, ttft_over, ttft_text)):
        if not over:
            continue
        held = state.held_for(name, now)
        if held >= rules.scale_out_after and name == TTFT_OVER and inp.booting > 0 and not queue_over:
            # +1 per breach is incremental: while instances already asked for still boot (minutes on a GPU
            # cloud), adding more on the same symptom only overshoots. The queue rule is absolute; it stays.
            waiting.append(f"{text} for {dur(held)}, {inp.booting} instance(s) still booting")
        elif held >= rules.scale_out_after:
            fired.append(f"{text} for {dur(held)}")
            state = state.restart(name, now)
        else:
            waiting.append(f"{text} for {dur(held)} (scale out after {dur(rules.scale_out_after)})")
    if fired:
        step = 1 if queue_over else max(1, ceil_count(current * rules.ttft_scale_out_step))
        target = max(current + step, demand or 0, floor)
        return Decision(target, f"{' and '.join(fired)} → {target}", state, demand)

    if current < floor:
        return Decision(floor, f"{current} is below the floor {floor} → {floor}", state, demand)

    if below:
        return _scale_in(rules, floor, inp, state, demand, queue_text, ttft_text)

    notes = [*waiting]
    if unknown:
        notes.append(f"{' and '.join(unknown)} unknown (no scale-in on missing data)")
    elif not waiting:
        notes.append(" and ".join(t for t in (queue_text, ttft_text) if t))
    return Decision(current, f"{'; '.join(notes)} → hold {current}", state, demand)


def _scale_in(
    rules: MinFloorPolicy | ReactiveRules,
    floor: int,
    inp: PolicyInput,
    state: PolicyState,
    demand: int | None,
    queue_text: str,
    ttft_text: str,
) -> Decision:
    now, current = inp.now, inp.current
    held = state.held_for(BELOW, now)
    peak = state.peaks.get(BELOW, 0.0)
    target = max(floor, ceil_count(peak / rules.queue_per_instance))
    per_instance = rules.in_flight_per_instance
    busy_note = ""
    if per_instance is not None:  # keep what the work in flight needs
        busy = state.peaks.get(IN_FLIGHT, 0.0)
        needed = ceil_count(busy / per_instance)
        if needed > target:
            target, busy_note = needed, f"{num(busy)} in flight need {needed}"
    # At most half the fleet per window even when the work in flight says more could go: per-request
    # latency grows with batch size, so a lightly loaded fleet overstates how few instances would do.
    step = rules.scale_in_step or (max(1, current // 2) if per_instance is not None else 1)
    if current - target > step:
        target = current - step
        busy_note = f"{busy_note}; at most {step} per window" if busy_note else f"step {step}"
    text = " and ".join(t for t in (queue_text, ttft_text) if t) + f" for {dur(held)}"
    if target >= current:  # the floor (or the work in flight) keeps it
        if held >= rules.scale_in_after:  # the peaks are a window's, not since the condition began
            state = _new_window(state, inp)
        why = busy_note or f"floor {floor}"
        return Decision(current, f"{text} → hold {current} ({why})", state, demand)
    if held < rules.scale_in_after:
        return Decision(current, f"{text} (scale in after {dur(rules.scale_in_after)}) → hold {current}", state, demand)
    last_change = state.last_change
    if last_change is not None and now - last_change < rules.cooldown:
        ago, cooldown = dur(now - last_change), dur(rules.cooldown)
        reason = f"{text}, but the count changed {ago} ago (cooldown {cooldown}) → hold {current}"
        return Decision(current, reason, state, demand)
    detail = []
    if inp.signals.queue_depth is not None and peak != inp.signals.queue_depth:
        detail.append(f"peak queue {num(peak)}")
    if busy_note:
        detail.append(busy_note)
    if target == floor and floor > 0:
        detail.append(f"floor {floor}")
    suffix = f" ({', '.join(detail)})" if detail else ""
    state = _new_window(state, inp)
    return Decision(target, f"{text} → {target}{suffix}", state, demand)


def _new_window(state: PolicyState, inp: PolicyInput) -> PolicyState:
    """Restart the quiet window: its clock, and its peaks from the current readings."""
    return (
        state.restart(BELOW, inp.now)
        .with_peak(BELOW, inp.signals.queue_depth)
        .with_peak(IN_FLIGHT, None)
        .with_peak(IN_FLIGHT, in_flight_of(inp))
    )
