"""Batch tiers by their queue-time target (``scale-to-zero`` with ``max_wait``).

Every queued task should start within ``max_wait``. The policy learns two figures (kept in the state):

- throughput per instance μ, tasks finished per ready instance-second while work waits and every slot is
  busy:
  finished = arrivals + (queued + in flight a tick ago) − (queued + in flight now);
- concurrency per instance, the most tasks one ready instance was seen running (for retiring idle ones);

and takes the boot time from its measured launches (3 minutes until one is measured). A backlog of Q
tasks starts within T seconds on n instances when n × μ × T ≥ Q; instances that must boot first give
T = time left − boot (the time left counts from when the backlog began: a queue that more than doubles
is a new burst with a clock of its own). The fewest instances that meet it cost the fewest
instance-seconds (every task's work is the same; fewer instances pay fewer boots), so a burst gets
n = ceil(Q ÷ (μ × T)) — several rounds on a few instances rather than one round on many that each pay a
boot. Ready instances count from now (r × μ × time left), every other one from its boot, so the ask does
not grow while the boots it asked for are under way. Once the queue is empty, instances beyond what the
tasks in flight occupy are retired after ``RETIRE_AFTER_S``; nothing queued or in flight → 0. Before μ is
known, the burst is sized by ``queue_per_instance`` as without ``max_wait``.
"""

from __future__ import annotations

from dataclasses import replace

from policies.common import ceil_count, dur, num
from policies.spec import ScaleToZeroPolicy
from policies.types import Decision, PolicyInput

DEFAULT_BOOT_S = 180.0
RETIRE_AFTER_S = 60.0
SAFETY = 0.15  # share of max_wait kept in hand for noise in task times
HALF_LIFE_S = 1800.0
WAITING, SPARE = "batch.waiting", "batch.spare"
_MU, _CONC, _TOTAL, _T, _DEPTH = "batch.mu", "batch.conc", "batch.total", "batch.t", "batch.depth"
_DONE, _SPENT = "batch.done", "batch.spent"
MIN_INSTANCE_SECONDS = 600.0  # busy instance-seconds before the throughput is trusted
BURST = 50  # tasks: a queue that more than doubles by at least this much is a new burst


def learn(inp: PolicyInput) -> PolicyInput:
    """The input with this tick's throughput and concurrency observations filed in its state."""
    depth, in_flight = inp.signals.queue_depth, inp.signals.in_flight
    if depth is None or in_flight is None:
        return inp
    return replace(inp, state=replace(inp.state, learned=_learn(inp, depth, in_flight)))


def _learn(inp: PolicyInput, depth: float, in_flight: float) -> dict[str, float]:
    out = dict(inp.state.learned)
    ready = inp.current - inp.booting
    total, before, last = depth + in_flight, out.get(_TOTAL), out.get(_T)
    # A broker reports no arrivals: then the drop of what is queued or running is a lower bound of what
    # finished (new tasks hide some), which errs on the side of more instances.
    arrivals = inp.signals.arrivals if inp.signals.arrivals is not None else 0.0
    if ready > 0:
        out[_CONC] = max(out.get(_CONC, 0.0), in_flight / ready)
    # a real backlog (more queued than running) and every slot busy: a trickle's pace is not a capacity
    saturated = ready > 0 and depth >= max(1.0, in_flight) and in_flight >= 0.9 * out.get(_CONC, 0.0) * ready
    if before is not None and last is not None and inp.now > last and saturated:
        # tasks finished ÷ instance-seconds, both summed with a half-life: a ratio of sums, so the 0s and 1s
        # of a single instance's 5-second ticks average out instead of the first one setting the figure
        keep = 0.5 ** ((inp.now - last) / HALF_LIFE_S)
        done = keep * out.get(_DONE, 0.0) + max(0.0, arrivals + before - total)
        spent = keep * out.get(_SPENT, 0.0) + ready * (inp.now - last)
        out[_DONE], out[_SPENT] = round(done, 4), round(spent, 4)
        if spent >= MIN_INSTANCE_SECONDS:
            out[_MU] = round(done / spent, 6)
    out[_TOTAL], out[_T] = total, inp.now
    return out


def decide(spec: ScaleToZeroPolicy, inp: PolicyInput) -> Decision | None:
    """The max_wait decision, or None to leave it to the queue_per_instance rules (μ not learned yet)."""
    assert spec.max_wait is not None
    depth, in_flight = inp.signals.queue_depth, inp.signals.in_flight
    if depth is None or in_flight is None:
        return None  # the shared rules hold on unknown signals and say so
    learned = inp.state.learned
    now, current = inp.now, inp.current
    state = inp.state.with_condition(WAITING, depth > 0, now)
    previous = learned.get(_DEPTH, 0.0)
    if depth > max(2 * previous, previous + BURST):  # a new burst: its clock starts now, not with the trickle
        state = state.restart(WAITING, now)
    state = replace(state, learned={**state.learned, _DEPTH: depth})
    mu = learned.get(_MU)
    demand = float(ceil_count(depth + in_flight))
    if depth > 0:
        state = state.with_condition(SPARE, False, now)
        if not mu:
            return None
        boot = inp.boot_time if inp.boot_time is not None else DEFAULT_BOOT_S
        budget = spec.max_wait * (1 - SAFETY)
        waited = state.held_for(WAITING, now)
        left = max(budget - waited, spec.max_wait * SAFETY)
        ready = current - inp.booting
        # ready instances start tasks from now; booting ones once their boot (begun about when the backlog
        # did) ends; new ones after a whole boot
        booting_window = max(0.0, left - max(0.0, boot - waited))
        backlog = depth - ready * mu * left - inp.booting * mu * booting_window
        if backlog <= 0:
            need = max(1, current)
        else:
            window = left - boot if left > boot else max(budget - boot, spec.max_wait * SAFETY)
            need = max(1, current + ceil_count(backlog / (mu * window)))
        text = (
            f"queue {num(depth)} within {dur(spec.max_wait)}: {num(round(mu * 60, 2))} tasks/min per instance,"
            f" boot {dur(boot)} → {need}"
        )
        if need > current:
            return Decision(need, text, state, demand)
        return Decision(current, f"{text}; {current} enough → hold {current}", state, demand)
    conc = learned.get(_CONC) or 1.0
    busy = ceil_count(in_flight / conc)
    state = state.with_condition(SPARE, busy < current, now)
    if busy >= current:
        return Decision(current, f"queue 0, {num(in_flight)} in flight busy {current} → hold {current}", state, demand)
    held = state.held_for(SPARE, now)
    text = f"queue 0, {num(in_flight)} in flight need {busy} ({num(round(conc, 1))} per instance) for {dur(held)}"
    if held < RETIRE_AFTER_S:
        return Decision(current, f"{text} (retire after {dur(RETIRE_AFTER_S)}) → hold {current}", state, demand)
    return Decision(busy, f"{text} → {busy}", state, demand)
