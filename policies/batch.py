"""Batch tiers by their queue-time target (``scale-to-zero`` with ``max_wait``).

Every queued task should start within ``max_wait``. The policy learns (kept in the state):

- the task time W by Little's law: task-seconds in flight ÷ tasks finished, both summed with a half-life,
  where finished = arrivals + (queued + in flight a tick ago) − (queued + in flight now). It holds for a
  trickle as for a burst and needs no instance to be saturated;
- the slots per instance c: what one ready instance runs while a real backlog waits (every slot busy);

so an instance starts c tasks as soon as it is ready, then μ = c ÷ W per second as its tasks end (counted
from half a task time on: tasks started together end together). The queue is first-in first-out and
kept as cohorts by when they were queued (policies/queue_ages.py); each cohort must start, with every
task ahead of it, by its own deadline: queued at + ``max_wait`` less 15 % kept for noise. The starts of
every instance by a deadline: a ready one's free slots and μ × the time left; a booting one's and a new
one's after the rest of their boot, averaged over the tier's measured boots (a burst's instances come up
over minutes, and the early ones start most of its tasks). The tier gets the fewest new instances that
cover the cohort short of the most: the fewest instance-seconds (every task's work is the same; fewer
instances pay fewer boots), so several rounds on a few instances rather than one round on many that each
pay a boot. A cohort too late for most boots is due as soon as a new instance can start it. A backlog is
sized with the task time learned when it began: while a burst ramps up, task-seconds in flight run ahead
of the tasks finished and would read as slower tasks.

Once the queue is empty, instances beyond what the tasks in flight occupy are retired after
``RETIRE_AFTER_S``; nothing queued or in flight → 0. Until both figures are learned (the first burst), the
burst is sized by ``queue_per_instance`` as without ``max_wait``.

A trickle (work that one instance runs with slots to spare) is served in rounds, not by a worker kept on:

- **Launch at the last safe moment.** With nothing ready or booting, a queue that one instance started
  ``DEFER_MARGIN_S`` from now would still start by every deadline, even after the slowest measured boot,
  waits; the queue grows meanwhile, and the instance comes up to a full round of work instead of idling
  through the trickle's gaps.
- **Switch off between rounds.** Once the queue is empty again and what runs fits one instance, the tier
  goes to 0 at once: the worker finishes what it runs (a drain is a Celery warm shutdown) and the next
  tasks wait for the next round. Only where that pays: a round costs a boot and the drain of its last
  tasks (until the longest ends: W × H(c), the c-th harmonic number), and it buys the time from the
  worker's going to the next one's coming (max_wait less the safety share, the margin and the slowest
  boot, plus an average boot); the saving at a trickle of nothing, 1 − (B + drain) ÷ that, must be
  ``MIN_ROUND_SAVING`` at least. A trickle at utilisation ρ saves (1 − ρ) of it. So a 10-minute target
  with 2–5 minute boots keeps its worker; a 30-minute or hourly one serves a trickle in rounds.

Both apply only where rounds pay, and need three measured boots: the last safe moment is only as safe
as the slowest boot seen. Elsewhere a queued task launches at once. A tier whose load never builds a
backlog never shows its slot count; there the most tasks one worker was seen running stands in for it (a
floor: earlier launches, never later), for one instance at a time; more than one on that floor is left to
the ``queue_per_instance`` rules, as before anything is learned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from scalectl.policies import queue_ages
from scalectl.policies.boot import pending, samples
from scalectl.policies.common import ceil_count, dur, num
from scalectl.policies.core.constants import DEFAULT_HORIZON_S
from scalectl.policies.spec import ScaleToZeroPolicy
from scalectl.policies.types import Decision, PolicyInput

OVERDUE_S = 60.0  # an instance booting longer than every measured boot is taken to be this far from ready
RETIRE_AFTER_S = 60.0
SAFETY = 0.15  # share of max_wait kept in hand for noise in task times
HALF_LIFE_S = 7200.0  # task times change slowly; a long memory spans whole bursts, ramp and drain alike
MAX_GAP_S = 60.0  # the longest time between two observations that is still learned from
MIN_FINISHED = 20.0  # tasks finished (half-life sum) before the task time is trusted
SPARE = "batch.spare"
_SLOTS, _TOTAL, _FLIGHT, _T, _READY = "batch.slots.", "batch.total", "batch.flight", "batch.t", "batch.ready"
_DONE, _BUSY, _TASK = "batch.done", "batch.busy", "batch.task_s"
_LEAST = "batch.least_slots"  # the most tasks one ready instance was seen running: a floor on its slots
BURST = 50  # tasks: a queue that grows past twice its size, by this many, is a burst
DEFER_MARGIN_S = 30.0  # a launch put off to the last moment still has this in hand: a late tick, a slow API
MIN_ROUND_SAVING = 0.2  # the share of a kept worker's time that switching it off between rounds must save


def learn(inp: PolicyInput) -> PolicyInput:
    """The input with this tick's task-time and slot observations filed in its state."""
    depth, in_flight = inp.signals.queue_depth, inp.signals.in_flight
    if depth is None or in_flight is None:
        return inp
    return replace(inp, state=replace(inp.state, learned=_learn(inp, depth, in_flight)))


def task_time(learned: Mapping[str, float]) -> float | None:
    """Seconds a task runs (Little's law), or None until enough have finished."""
    done, busy = learned.get(_DONE, 0.0), learned.get(_BUSY, 0.0)
    return busy / done if done >= MIN_FINISHED and busy > 0 else None


def throughput(learned: Mapping[str, float]) -> float | None:
    """Tasks one instance finishes per second (μ = slots ÷ task time), or None until both are learned."""
    conc, task = slots(learned), task_time(learned)
    return conc / task if conc and task else None


def slots(learned: Mapping[str, float]) -> float | None:
    """Tasks one instance runs at once: the count seen most (weighted by recency) while a backlog waited."""
    seen = {key: weight for key, weight in learned.items() if key.startswith(_SLOTS)}
    if not seen:
        return None
    return float(max(seen, key=lambda key: (seen[key], key))[len(_SLOTS) :])


def least_slots(learned: Mapping[str, float]) -> float | None:
    """At least this many tasks run at once on one instance: the most seen running on one (decaying with
    the task time's half-life), or None before any ran. A tier that never builds a backlog never shows its
    slot count; this floor is what it has shown."""
    seen = learned.get(_LEAST)
    return float(max(1, math.floor(seen))) if seen else None


def _learn(inp: PolicyInput, depth: float, in_flight: float) -> dict[str, float]:
    out = dict(inp.state.learned)
    ready = inp.current - inp.booting
    total, before, flight, last = depth + in_flight, out.get(_TOTAL), out.get(_FLIGHT), out.get(_T)
    # A broker reports no arrivals: then the drop of what is queued or running is a lower bound of what
    # finished (new tasks hide some): longer task times, fewer tasks per instance, more instances.
    arrivals = inp.signals.arrivals if inp.signals.arrivals is not None else 0.0
    keep = 0.5 ** ((inp.now - last) / HALF_LIFE_S) if last is not None and inp.now > last else 1.0
    # A real backlog (as many waiting as one instance runs): every slot of a ready instance is busy, so
    # what each runs is its slot count; a task or two queued between ticks says nothing of the kind. Only
    # while the ready count holds still (an instance counted ready a tick before its worker takes tasks,
    # or one just gone, reads low or high), and the count seen most wins (workers draining after a spot
    # notice still run tasks and read high for a few ticks).
    steady = ready == out.get(_READY)
    out[_READY] = float(ready)
    if steady and ready > 0:
        out[_LEAST] = round(max(out.get(_LEAST, 0.0) * keep, in_flight / ready), 4)
    if steady and ready > 0 and depth >= max(1.0, in_flight / ready):
        for key in [key for key in out if key.startswith(_SLOTS)]:
            out[key] = round(out[key] * keep, 4)
            if out[key] < 0.01:
                del out[key]
        key = f"{_SLOTS}{max(1, round(in_flight / ready))}"
        out[key] = out.get(key, 0.0) + 1.0
    # over a gap (a restart, a lost tick) what ran in between is unknown: learn nothing from it
    if before is not None and flight is not None and last is not None and 0 < inp.now - last <= MAX_GAP_S:
        done = keep * out.get(_DONE, 0.0) + max(0.0, arrivals + before - total)
        busy = keep * out.get(_BUSY, 0.0) + (flight + in_flight) / 2 * (inp.now - last)
        out[_DONE], out[_BUSY] = round(done, 4), round(busy, 4)
    out[_TOTAL], out[_FLIGHT], out[_T] = total, in_flight, inp.now
    return out


def decide(spec: ScaleToZeroPolicy, inp: PolicyInput) -> Decision | None:
    """The max_wait decision, or None to leave it to the queue_per_instance rules (μ not learned yet)."""
    assert spec.max_wait is not None
    depth, in_flight = inp.signals.queue_depth, inp.signals.in_flight
    if depth is None or in_flight is None:
        return None  # the shared rules hold on unknown signals and say so
    learned = inp.state.learned
    now, current = inp.now, inp.current
    before = sum(count for _, count in queue_ages.cohorts(learned))
    queued = queue_ages.advance(learned, now=now, depth=depth, arrivals=inp.signals.arrivals)
    state = replace(inp.state, learned=queued)
    if depth > 0 and (before == 0 or depth > 2 * before + BURST):  # a backlog or a burst begins
        state = replace(state, learned={**queued, _TASK: task_time(learned) or 0.0})
    # Where no backlog ever showed the slot count, what ran on one instance is a floor: fewer starts per
    # instance than it has, so earlier launches, never later. Only for one instance at a time (a trickle's
    # rounds): sized on the floor, a burst would get several times the instances it needs.
    shown = slots(learned)
    conc, task = shown or least_slots(learned), state.learned.get(_TASK)
    demand = float(ceil_count(depth + in_flight))
    measured = samples(learned)
    round_saves = round_saving(spec.max_wait, task_time(learned), conc, measured)
    if depth > 0:
        state = state.with_condition(SPARE, False, now)
        if not task or not conc:
            return None
        mu = conc / task
        boot = inp.boot_time if inp.boot_time is not None else DEFAULT_HORIZON_S
        boots = measured or [boot]
        budget = spec.max_wait * (1 - SAFETY)
        ready = current - inp.booting

        def starts(window: float) -> float:
            """Tasks an instance that is ready ``window`` seconds before the deadline starts by then: all its
            slots at once, then one per task that ends. Tasks started together end about one task time
            later; half a task time later is when the first ends on average unless task times are all
            alike, so the stream of ends is counted from there."""
            return conc + mu * max(0.0, window - task / 2) if window > 0 else 0.0

        def expected(window: float, elapsed: float) -> float:
            """Starts by the deadline of an instance booting for ``elapsed`` s, over the measured boots."""
            rests = [b - elapsed for b in boots if b > elapsed] or [OVERDUE_S]
            return sum(starts(window - rest) for rest in rests) / len(rests)

        # Ready instances: their free slots now, then as their tasks finish; booting ones once their boot
        # ends; new ones after a whole boot. Each boot is drawn from the measured ones, not all the slowest:
        # a burst's instances come up over minutes and the early ones start most of its tasks.
        launched = pending(learned)[-inp.booting :] if inp.booting else []
        elapsed = [now - t for t in launched] + [0.0] * (inp.booting - len(launched))
        free = max(0.0, conc * ready - in_flight)

        def covered(window: float) -> float:
            return free + ready * mu * max(0.0, window) + sum(expected(window, e) for e in elapsed)

        # FIFO: every cohort starts once all before it have; each must start by its own deadline
        queue = queue_ages.cohorts(state.learned)
        # Rounds: whether one instance launched DEFER_MARGIN_S from now, after the slowest measured boot,
        # still starts every cohort by its deadline (then the launch waits for the last safe moment)
        can_wait = current == 0 and round_saves >= MIN_ROUND_SAVING
        slowest = max(measured) if can_wait else math.inf
        ahead, more, waits = 0.0, 0, can_wait
        for queued_at, count in queue:
            ahead += count
            window = queued_at + budget - now
            waits = waits and ahead <= starts(window - DEFER_MARGIN_S - slowest)
            if expected(window, 0.0) <= 0:  # too late for any boot: as soon as a new instance can
                window = max(window, boot + spec.max_wait * SAFETY)
            short = ahead - covered(window)
            if short > 0:
                each = expected(window, 0.0) or starts(spec.max_wait * SAFETY)
                more = max(more, ceil_count(short / each))
        need = max(1, current + more)
        if shown is None and need > max(1, current):
            return None  # more than one instance on a floor of the slots: the queue_per_instance rules
        oldest = now - queue[0][0]
        text = (
            f"queue {num(depth)} (oldest {dur(oldest)}) within {dur(spec.max_wait)}: {num(round(mu * 60, 2))}"
            f" tasks/min and {num(round(conc, 1))} at once per instance, boot {dur(boot)}"
        )
        if waits:
            text += f"; one launched {dur(DEFER_MARGIN_S)} from now starts it in time after the slowest boot"
            return Decision(0, f"{text} ({dur(slowest)}) → wait, 0", state, demand)
        if need > current:
            return Decision(need, f"{text} → {need}", state, demand)
        return Decision(current, f"{text}; {current} enough → hold {current}", state, demand)
    each = conc or 1.0
    busy = ceil_count(in_flight / each)
    if current and busy <= 1 and round_saves >= MIN_ROUND_SAVING:
        text = (
            f"queue 0, {num(in_flight)} in flight: the next tasks can wait for a new instance"
            f" within {dur(spec.max_wait)} ({100 * round_saves:.0f}% of a kept worker's time saved)"
        )
        return Decision(0, f"{text} → 0 (what runs finishes)", state.with_condition(SPARE, False, now), demand)
    state = state.with_condition(SPARE, busy < current, now)
    if not current:  # what runs is on draining workers, which finish it
        return Decision(0, f"queue 0, {num(in_flight)} in flight on draining instances → hold 0", state, demand)
    if busy >= current:
        return Decision(current, f"queue 0, {num(in_flight)} in flight busy {current} → hold {current}", state, demand)
    held = state.held_for(SPARE, now)
    text = f"queue 0, {num(in_flight)} in flight need {busy} ({num(round(each, 1))} per instance) for {dur(held)}"
    if held < RETIRE_AFTER_S:
        return Decision(current, f"{text} (retire after {dur(RETIRE_AFTER_S)}) → hold {current}", state, demand)
    return Decision(busy, f"{text} → {busy}", state, demand)


def round_saving(max_wait: float, task: float | None, slots: float | None, boots: list[float]) -> float:
    """The share of a kept worker's time that serving a trickle in rounds saves (at a trickle of nothing):
    1 − (boot + drain) ÷ (the time from the worker's going to the next one's ready). A round's new
    instance is launched when the first task queued after the worker went can wait no longer: the budget
    less the margin and the slowest boot, and it is ready an average boot later. A drained worker is billed
    until the last of its tasks ends: W × H(c) for c tasks of exponential times (mean W), an upper bound for
    task times less variable than that."""
    if task is None or not slots or not boots:
        return 0.0
    mean = sum(boots) / len(boots)
    drain = task * sum(1 / k for k in range(1, round(slots) + 1))
    between = max_wait * (1 - SAFETY) - DEFER_MARGIN_S - max(boots) + mean
    return 1 - (mean + drain) / between if between > 0 else 0.0
