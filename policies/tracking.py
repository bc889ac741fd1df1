"""Target tracking (``mode: target``, the default of min-floor and of predictive's reactive part).

need = ceil(load ÷ (capacity per instance × target utilisation)), with load = requests in flight
(policies/load.py) at the window's rate, or at a recent or burst rate when higher (policies/burst.py), or
where a ramp will be a boot from now (policies/ramp.py),
and capacity from policies/capacity.py. Then, the way Kubernetes' HPA behaves:

- scale out in the tick the need exceeds the count, straight to the need; a TTFT breach (the held
  quantile, ``ttft_quantile``, p99 by default, over the target) with no instance on its way adds what the
  measured excess (requests waiting) needs, at least one; no scale-in while TTFT breaches, unless it is a
  tail that more instances did not cure (``_tail_futility``): then it neither adds nor holds;
- scale in only to the highest need over the last ``stabilization`` seconds (a need recorded 4m59s ago
  still counts with a 5m window; one from 5m01s ago does not), and only once a full window of known load
  has been seen; at most ``scale_in_max_fraction`` of the fleet per ``scale_in_period``. The needs kept for
  scale-in count the load ``tolerance`` (10%) higher, a dead band against flapping at a boundary;
- no work at all (nothing in flight, nothing arriving) for ``idle_after``: straight back to the floor;
- load unknown (missing or stale figures): hold, never scale in, and say so; the window starts again.
"""

from __future__ import annotations

import math
from dataclasses import replace

from scalectl.policies import boot, hysteresis, ramp
from scalectl.policies.burst import burst_rate
from scalectl.policies.capacity import (
    SMALL_FLEET,
    TOO_LITTLE,
    CapacityEstimate,
    estimate,
    fast_rate,
    last_tick,
    observe,
    observe_fast_rate,
    observe_service_time,
    service_time,
    service_time_waiting,
    small_fleet_capacity,
)
from scalectl.policies.common import ceil_count, dur, latency, num
from scalectl.policies.load import Load, computed_tokens, load_of, offered, rate_text
from scalectl.policies.spec import ReactiveRules
from scalectl.policies.types import Decision, PolicyInput, PolicyState, Signals

DRAIN_S = 120.0  # a backlog met by a breach is served within about one boot
KNOWN = "load_known"  # since when the load has been known without a gap
IDLE = "idle"
SCALED_IN = "scaled_in"  # the last scale-in (for the bounded rate)
WAITING_LAST = "breach.waiting"  # the last tick's requests waiting: a backlog that shrinks is being served
WAITING_SVC = "svc.waiting"  # the shortest service time seen while requests waited, before one is learned
HEDGE_FOR = "hedge.for"  # the count hedged launches were added for: once that many serve, the rest go
NARROW_BOOTS = 1.25  # measured boot times within this ratio (p90 ÷ p10): launching extra would not pay
# A breach that more instances did not cure (``_tail_futility``): the breach the test starts from, and the tail
# found not to shrink with the fleet, with when it was found.
ANCHOR = ANCHOR_TAIL, ANCHOR_LOAD, ANCHOR_READY = "tail.anchor", "tail.anchor.load", "tail.anchor.ready"
FUTILE_TAIL, FUTILE_T, FUTILE_LOAD = "tail.futile", "tail.futile.t", "tail.futile.load"
READY_N, READY_SINCE = "tail.ready", "tail.ready_since"  # the ready count and since when it has been that
RELIEVED = 0.8  # a test needs each ready instance carrying at most this share of the anchor's load
UNCURED = 0.75  # ... and the tail still this share (or more) as far over the target as at the anchor
FUTILE_BAND = 1.05  # a breach up to this far above the uncured tail is that tail again
PROBE = 1.25  # an excused breach lets each instance carry up to this much more than where the tail held
FUTILE_FOR_S = 6 * 3600.0  # then the walk tests again: traffic and engines change
QUEUED_T = "tail.queued_t"  # the last tick with requests waiting
QUEUE_WINDOW_S = 60.0  # a TTFT quantile read within this of a queue still holds the queue's wait


def capacity_for(rules: ReactiveRules, inp: PolicyInput, state: PolicyState) -> CapacityEstimate | None:
    prior = rules.capacity if rules.capacity is not None else inp.capacity_prior
    if prior is None:
        return None
    return estimate(state.learned, prior, learn=rules.learn_capacity)


def tail_ttft(rules: ReactiveRules, signals: Signals) -> tuple[float | None, str]:
    """The TTFT quantile the tier is held to (``ttft_quantile``) and its name; p95 where no p99 is given."""
    if rules.ttft_quantile >= 0.99 and signals.ttft_p99_s is not None:
        return signals.ttft_p99_s, "p99"
    return signals.ttft_p95_s, "p95"


def _learn(rules: ReactiveRules, inp: PolicyInput, load: Load, tail: float | None) -> PolicyState:
    signals = inp.signals
    learned = observe_service_time(
        ramp.observe(
            observe_fast_rate(inp.state.learned, now=inp.now, arrivals=signals.arrivals),
            now=inp.now,
            arrivals=signals.arrivals,
            since=last_tick(inp.state.learned),
        ),
        now=inp.now,
        in_flight=load.in_flight,
        waiting=load.waiting,
        rate=load.rate,
        ttft_ok=_healthy_tail(rules, inp.state, tail),
    )
    waiting = _waiting(signals)
    if waiting is None:
        learned.pop(WAITING_LAST, None)
    else:
        learned[WAITING_LAST] = waiting
    # The shortest: a batch that just filled has finished little yet, so its reading runs long for a while.
    if service_time(learned) is not None:
        learned.pop(WAITING_SVC, None)
    elif (waiting_svc := service_time_waiting(load.running, load.waiting, signals.finish_rate)) is not None:
        learned[WAITING_SVC] = round(min(waiting_svc, learned.get(WAITING_SVC, waiting_svc)), 4)
    prior = rules.capacity if rules.capacity is not None else inp.capacity_prior
    if prior is None or not rules.learn_capacity:
        return replace(inp.state, learned=learned)
    # The load the window offered (its arrival rate × service time), not this tick's count in flight: the
    # TTFT quantile describes the window, and a burst's few seconds of pile-up are not what each instance
    # carries through it. In flight stands in until a service time is known.
    svc = service_time(learned)
    window_load = load.rate * svc if load.rate is not None and svc is not None else load.in_flight
    learned = observe(
        learned,
        now=inp.now,
        prior=prior,
        load=window_load,
        ready=inp.current - inp.booting,
        ttft=tail,
        target=rules.ttft_target,
        waiting=load.waiting,
    )
    return replace(inp.state, learned=learned)


def _healthy_tail(rules: ReactiveRules, state: PolicyState, tail: float | None) -> bool:
    """Whether the tail lets a tick time service: within the target, or within a tail more instances did not
    cure (``_tail_futility``), which is the requests' own, not an overload's wait. Without the second, a
    tier whose target is under that tail never learns a service time and sizes on what is in flight."""
    if tail is None or tail <= rules.ttft_target:
        return True
    futile = state.learned.get(FUTILE_TAIL)
    return futile is not None and tail <= futile * FUTILE_BAND


def _window(state: PolicyState, now: float, need: int, window: float) -> PolicyState:
    """Add this tick's need to the sliding-window maximum and drop what fell out of the window."""
    kept = [(t, n) for t, n in state.needs if t >= now - window and n > need]
    return replace(state, needs=(*kept, (now, float(need))))


def _highest_need(state: PolicyState) -> int:
    """The highest need the stabilisation window holds (with the load tolerance); 0 when it holds none."""
    return int(max((n for _, n in state.needs), default=0))


def _since(state: PolicyState, name: str, now: float | None) -> PolicyState:
    since = dict(state.since)
    if now is None:
        since.pop(name, None)
    else:
        since[name] = now
    return replace(state, since=since)


def evaluate(rules: ReactiveRules, floor: int, inp: PolicyInput) -> Decision:
    now, current = inp.now, inp.current
    load = load_of(inp.signals)
    previous = last_tick(inp.state.learned)
    tail = tail_ttft(rules, inp.signals)  # read once: learning, the window's harm rule and the breach rule
    state = _learn(rules, inp, load, tail[0])
    fast = fast_rate(state.learned)
    arriving = bool(load.rate) or bool(inp.signals.arrivals)
    if load.rate is not None and fast is not None and fast > load.rate and arriving:
        # The last few ticks run ahead of the reading window. Not once nothing arrives in the window or in
        # this tick: the decaying average's tail would keep an idle tier busy for minutes.
        load = replace(load, rate=fast)
    burst = burst_rate(inp.signals.arrivals, None if previous is None else now - previous)
    bursting = load.rate is not None and burst is not None and burst > load.rate
    if bursting:
        load = replace(load, rate=burst)  # a burst within the window (policies/burst.py)
    ahead = ramp.projected(state.learned, now=now, lead=inp.boot_time or ramp.LEAD_S)
    rising = load.rate is not None and ahead is not None and ahead.rate > load.rate
    if rising:
        assert ahead is not None
        load = replace(load, rate=ahead.rate)  # where a ramp will be when a launch serves (policies/ramp.py)
    cap = capacity_for(rules, inp, state)
    if cap is None or not load.known:
        state = replace(state.with_condition(KNOWN, False, now).with_condition(IDLE, False, now), needs=())
        if cap is None:
            why = "capacity per instance unknown: set policy `capacity` (requests in flight one instance serves)"
        else:
            why = f"{load.text()} (no scale-in on missing data)"
        if current < floor:
            return Decision(floor, f"{why}; {current} is below the floor {floor} → {floor}", state, load.in_flight)
        return Decision(current, f"{why} → hold {current}", state, load.in_flight)

    assert load.in_flight is not None
    per = cap.per_instance * rules.target_utilization
    svc, svc_note = _service_time(state, load, inp.signals)
    asked = offered(load, svc)
    assert asked is not None
    need = _small_fleet(rules, state, cap, asked, max(floor, ceil_count(asked / per)), current)
    basis = _basis(load, cap, svc, rules.target_utilization) + svc_note
    if bursting:
        basis += f" (a burst: {num(round(inp.signals.arrivals or 0))} arrivals this tick)"
    if rising:
        assert ahead is not None
        basis += f" (rising {ahead.slope:.2g} req/s each second: {rate_text(ahead.rate)} in {dur(ahead.lead)})"
    state = state.with_condition(KNOWN, True, now).with_condition(IDLE, load.idle, now)
    keep = max(floor, ceil_count(asked * (1 + rules.tolerance) / per))
    keep = _small_fleet(rules, state, cap, asked * (1 + rules.tolerance), keep, current)
    compute = _compute_need(rules, inp, _rate_factor(load, inp.signals))
    if compute is not None:  # two limits, like an HPA with two metrics: the larger need wins
        fraction, compute_text = compute
        by_compute = max(floor, ceil_count(fraction))
        if by_compute > need:
            basis, need = f"{basis} → {need}; {compute_text}", by_compute
        keep = max(keep, ceil_count(fraction * (1 + rules.tolerance)))
    busy = max(asked / per, compute[0] if compute is not None else 0.0)  # instances' worth of work
    state, uncured, held = _tail_futility(rules, inp, state, tail, busy)
    if uncured:  # the tail more instances did not cure: not a breach to scale on (no hold, no walk)
        basis += f"; {uncured}"
        tail = (None, tail[1])
        need, keep = max(need, held), max(keep, held)
    breached = tail[0] is not None and tail[0] > rules.ttft_target
    # a twentieth of the tick's requests over the target: ten times a 99.5% SLO's share
    severe = breached and (inp.signals.ttft_p95_s or 0.0) > rules.ttft_target
    state = replace(state, learned=hysteresis.observe(rules, state.learned, now, breached, severe))
    span = hysteresis.window(rules, state.learned)
    state = _window(state, now, keep, span)

    breach = _breach(rules, inp, per, need, svc, busy, tail, inp.state.learned.get(WAITING_LAST))
    if breach is not None and breach[0] > need:
        need_out, breach_text = breach
    else:
        need_out, breach_text = need, ""
    state, settled = _settle_hedge(inp, state, need_out, f"{basis} → {need}")
    if settled is not None:
        count, text = settled
        return Decision(count, text, state, load.in_flight)
    if need_out > current:
        state = replace(
            state, learned=hysteresis.scaling_out(rules, state.learned, now, need_out, need, breached, severe)
        )
        if need_out > need:  # what the breach asked for is a need too: the window keeps it
            state = _window(state, now, need_out, hysteresis.window(rules, state.learned))
        text = f"{basis} → {need}" + (f"; {breach_text} → {need_out}" if breach_text else "")
        full = busy * rules.target_utilization  # instances' worth of work at full capacity
        hedging = rules.hedge_launches and HEDGE_FOR not in state.learned
        extra = _hedge(inp, state, breached, need_out, full) if hedging else 0
        if extra:
            state = replace(state, learned={**state.learned, HEDGE_FOR: float(need_out)})
            text += f"; short now: +{extra} hedged launch(es), cancelled once {need_out} serve → {need_out + extra}"
        return Decision(need_out + extra, text, state, load.in_flight)
    if current < floor:
        text = f"{basis} → {need}; {current} is below the floor {floor} → {floor}"
        return Decision(floor, text, state, load.in_flight)
    if breach is not None:  # TTFT over the target: never the moment to scale in
        return Decision(current, f"{basis} → {need}; {breach[1]} → hold {current}", state, load.in_flight)

    idle_for = state.held_for(IDLE, now)
    if load.idle and idle_for >= rules.idle_after and current > floor:
        state = _since(state, SCALED_IN, now)
        return Decision(floor, f"no work at all for {dur(idle_for)} → floor {floor}", state, load.in_flight)
    return _scale_in(rules, floor, inp, state, need, basis, load)


def _waiting(signals: Signals) -> float | None:
    """Requests waiting: vLLM's own figure, else the queue in front of it."""
    return signals.requests_waiting if signals.requests_waiting is not None else signals.queue_depth


def _service_time(state: PolicyState, load: Load, signals: Signals) -> tuple[float | None, str]:
    """The learned service time; before one is learned, while requests wait, the one the running requests
    show (``service_time_waiting``), when it sizes below the requests in flight. Without it a cold fleet
    under traffic sizes on what is in flight, backlog included: the backlog grows every tick until the first
    instances are up, and the fleet with it, to its ``max``, though new instances serve only what arrives
    (the backlog waits in the engines that took it)."""
    learned = service_time(state.learned)
    if learned is not None or load.rate is None or load.in_flight is None or not load.waiting:
        return learned, ""
    waiting_svc = state.learned.get(WAITING_SVC)
    if waiting_svc is None or load.rate * waiting_svc >= load.in_flight:
        return None, ""
    note = (
        f" (service time {waiting_svc:.1f} s while requests wait: the least running ÷ finished seen;"
        f" now {num(round(load.running or 0))} ÷ {rate_text(signals.finish_rate or 0.0)})"
    )
    return waiting_svc, note


def _tail_futility(
    rules: ReactiveRules, inp: PolicyInput, state: PolicyState, tail: tuple[float | None, str], busy: float
) -> tuple[PolicyState, str, int]:
    """Whether a TTFT breach with nothing waiting is one that more instances did not cure: the reason to
    give when it is (else ""), and the fewest instances the fleet may then shrink to.

    A tail can breach for reasons no fleet size removes: a target below what the client overhead and the
    prompt's prefill take at that quantile, or a few slow requests. The breach rule adds an instance per
    breach, so such a tail walks the fleet to ``max`` and holds it there (no scale-in while TTFT breaches).
    The test: the first breach with nothing waiting and none booting is the anchor (its tail, ready count
    and work per ready instance). Once the fleet has grown past it and each ready instance carries at most
    ``RELIEVED`` of the anchor's work, a tail still ``UNCURED`` as far over the target is not capacity: for
    ``FUTILE_FOR_S``, a breach up to ``FUTILE_BAND`` above it neither adds nor holds. That is known only
    for as much work per instance as the tail was seen at: the fleet may shrink until each instance carries
    ``PROBE`` times that, and once it has held there a window long within the band, that much is known too
    (a tail that grows past the band is a breach again, and the fleet grows back). A cured tail moves the
    anchor to now; a tail within the target ends the episode. Requests waiting are a shortage whatever the
    tail, and so is a tail read within ``QUEUE_WINDOW_S`` of a queue (the window still holds its wait):
    never excused, never a test."""
    value, quantile = tail
    now, target = inp.now, rules.ttft_target
    learned = dict(state.learned)
    if (_waiting(inp.signals) or 0.0) > 0:
        learned[QUEUED_T] = now
    ready = inp.current - inp.booting
    if learned.get(READY_N) != ready:
        learned[READY_N], learned[READY_SINCE] = float(ready), now
    found = learned.get(FUTILE_T)
    if found is not None and now - found > FUTILE_FOR_S:
        for key in (FUTILE_T, FUTILE_TAIL, FUTILE_LOAD):
            learned.pop(key, None)
    if value is None or value <= target:
        for key in ANCHOR:
            learned.pop(key, None)
        return replace(state, learned=learned), "", 0
    queued = learned.get(QUEUED_T)
    if (queued is not None and now - queued <= QUEUE_WINDOW_S) or inp.booting > 0 or ready < 1:
        return replace(state, learned=learned), "", 0  # a queue now or in the window's tail is capacity
    per_ready = busy / ready
    futile, held_at = learned.get(FUTILE_TAIL), learned.get(FUTILE_LOAD, 0.0)
    if futile is not None and value <= futile * FUTILE_BAND and per_ready <= PROBE * held_at:
        if per_ready > held_at and now - learned[READY_SINCE] >= QUEUE_WINDOW_S:
            learned[FUTILE_LOAD] = held_at = per_ready  # the tail held at more work each: so much is known
        fewest = ceil_count(busy / (PROBE * held_at))
        text = (
            f"TTFT {quantile} {latency(value)} > {latency(target)} with nothing waiting: the tail more instances"
            f" did not cure ({latency(futile)}), not capacity; no fewer than {fewest} (each at most"
            f" {PROBE - 1:.0%} busier than where that tail held)"
        )
        return replace(state, learned=learned), text, fewest
    anchor = learned.get(ANCHOR_TAIL)
    anchor_load, anchor_ready = learned.get(ANCHOR_LOAD, 0.0), learned.get(ANCHOR_READY, 0.0)
    if anchor is None or ready <= anchor_ready or per_ready > RELIEVED * anchor_load:
        if anchor is None:
            learned.update(zip(ANCHOR, (value, per_ready, float(ready)), strict=True))
        return replace(state, learned=learned), "", 0
    if value - target < UNCURED * (anchor - target):  # more instances helped: test again from here
        learned.update(zip(ANCHOR, (value, per_ready, float(ready)), strict=True))
        return replace(state, learned=learned), "", 0
    for key in ANCHOR:
        learned.pop(key, None)
    learned[FUTILE_TAIL], learned[FUTILE_T] = min(value, anchor), now  # the tail that stayed
    learned[FUTILE_LOAD] = max(anchor_load, learned.get(FUTILE_LOAD, 0.0))  # the most work each it was seen at
    text = (
        f"TTFT {quantile} {latency(value)} > {latency(target)} with nothing waiting, as at {int(anchor_ready)}"
        f" ready ({latency(anchor)}) with {anchor_load / per_ready:.1f}× the work each: not capacity"
    )
    return replace(state, learned=learned), text, ready


def _settle_hedge(
    inp: PolicyInput, state: PolicyState, need_out: int, head: str
) -> tuple[PolicyState, tuple[int, str] | None]:
    """Launches hedged on an earlier tick (``_hedge``): while fewer than their count serve and some still
    boot, hold (a need that grew raises the count they are for); then cancel those still booting beyond the
    need, and forget the hedge. The count and reason to return now, if any."""
    hedged_for = state.learned.get(HEDGE_FOR)
    if hedged_for is None:
        return state, None
    current = inp.current
    hedged_for = max(hedged_for, float(need_out))  # a deficit that grew keeps its hedge
    ready = current - inp.booting
    if ready < hedged_for and inp.booting > 0:
        state = replace(state, learned={**state.learned, HEDGE_FOR: hedged_for})
        if need_out > current:
            return state, None
        return state, (current, f"{head}; {ready} of the {int(hedged_for)} launched for ready → hold {current}")
    state = replace(state, learned={k: v for k, v in state.learned.items() if k != HEDGE_FOR})
    # Down to the need, the count launched for and the window's highest need; the rest were never needed,
    # so they go now, not later through the scale-in path's window, where they would read as a scale-in.
    # The reconciler retires the instances still booting first.
    keep = max(need_out, int(hedged_for), _highest_need(state))
    surplus = current - keep
    if surplus <= 0:
        return state, None
    cancelled = min(inp.booting, surplus)
    parts = [f"the {cancelled} hedged launch(es) still booting are cancelled"] if cancelled else []
    if surplus > cancelled:
        parts.append(f"the {surplus - cancelled} hedged launch(es) that served too are retired")
    text = f"{head}; {ready} ready serve the {int(hedged_for)} launched for: {' and '.join(parts)} → {keep}"
    return state, (keep, text)


def _hedge(inp: PolicyInput, state: PolicyState, breached: bool, need_out: int, full: float) -> int:
    """Extra launches while the tier is short now: more work than its ready instances carry at full capacity
    (``full``, instances' worth), or the TTFT target breached with requests waiting, no fewer than a tick
    ago. As many again as the deficit. Boot times vary (2–5 minutes is common), and the k-th of
    2k launches serves about when the median boot ends, where k launches wait for the slowest of k; the
    extra ones are cancelled, most of them still booting, once the deficit serves. Not when the tier's own
    boots have been measured close together (``NARROW_BOOTS``): then nothing comes sooner."""
    waiting, before = _waiting(inp.signals) or 0.0, inp.state.learned.get(WAITING_LAST)
    backlog_grows = breached and waiting > 0 and (before is None or waiting >= before)
    if not backlog_grows and full <= inp.current - inp.booting:
        return 0
    p10, p90 = boot.percentile(state.learned, 0.1), boot.percentile(state.learned, 0.9)
    if p10 is not None and p90 is not None and p90 < NARROW_BOOTS * p10:
        return 0
    return need_out - inp.current


def _small_fleet(
    rules: ReactiveRules, state: PolicyState, cap: CapacityEstimate, asked: float, need: int, current: int
) -> int:
    """A scale-in to a small fleet stops at the size that has not breached at this load per instance: one or
    two servers carry a bursty load worse than a large fleet's average says (policies/capacity.py)."""
    if not rules.learn_capacity:
        return need
    while 1 <= need < current and need <= SMALL_FLEET:
        breached = small_fleet_capacity(state.learned, cap.prior, need)
        if breached is None or asked / need <= breached * rules.target_utilization:
            return need
        need += 1
    return need


def _rate_factor(load: Load, signals: Signals) -> float:
    """How far the rate the policy sizes for (a recent or burst rate) runs above the window's: the token
    rate, read over the same window, scales by as much."""
    window = signals.request_rate
    if load.rate is None or not window or load.rate <= window:
        return 1.0
    return load.rate / window


def _compute_need(rules: ReactiveRules, inp: PolicyInput, factor: float = 1.0) -> tuple[float, str] | None:
    """Instances the token rate needs at the engine's compute per instance (``inp.compute_prior``), as a
    fraction (the caller rounds, with its tolerance for keeping): long prompts run out of prefill compute
    long before they fill the sequence slots the in-flight capacity counts. ``factor``: the arrival rate
    sized for over the window's (a burst), which the tokens follow."""
    tokens = computed_tokens(inp.signals)
    if tokens is None or not inp.compute_prior:
        return None
    per = inp.compute_prior * rules.target_utilization
    scaled = f" × {factor:.1f}" if round(factor, 1) > 1 else ""  # the window's tokens at this tick's rate
    text = (
        f"compute {num(round(tokens / 1000, 1))}k tokens/s{scaled} ÷ ({num(round(inp.compute_prior / 1000, 1))}k"
        f" × {rules.target_utilization:g})"
    )
    tokens *= factor
    return tokens / per, text


def _basis(load: Load, cap: CapacityEstimate, svc: float | None, utilisation: float) -> str:
    """``load 312 req/s ÷ (41 req/s × 0.85)``: in requests per second once the service time is known."""
    if load.rate is not None and svc is not None:
        per_rate = rate_text(cap.per_instance / svc)
        text = f"load {rate_text(load.rate)} ÷ ({per_rate} × {utilisation:g})"
        if load.running is not None and load.running > load.rate * svc:
            text += f" ({num(round(load.running))} running)"
        return text
    return (
        f"load {num(round(load.in_flight or 0, 1))} in flight ÷ ({num(round(cap.per_instance, 1))} × {utilisation:g})"
    )


def _breach(
    rules: ReactiveRules,
    inp: PolicyInput,
    per: float,
    need: int,
    svc: float | None,
    busy: float,
    tail: tuple[float | None, str],
    waiting_before: float | None,
) -> tuple[int, str] | None:
    """A TTFT breach the load figures do not explain: add what the requests waiting need (at least one),
    unless instances are already on their way (their capacity is the answer to the same symptom). The
    waiting requests are a backlog, not a steady load: with a known service time they need the instances
    that serve them within ``DRAIN_S`` (per-instance rate × DRAIN_S each), else one slot each.

    Nothing waiting while the fleet runs under a fifth of its capacity (``busy``: instances' worth of work,
    requests in flight or compute, whichever is more, at this tick's burst rate) is no shortage: a few slow requests
    (a long prompt, a cold cache) breach a quiet window's tail at any fleet size, and an instance added per
    breach only grows a night's fleet without end. It holds (no scale-in while TTFT breaches) and adds
    nothing.

    Fewer waiting than a tick ago (``waiting_before``) is a backlog being served: it waits in the engines that
    took it, and a new instance takes only new arrivals (the rate's need covers those), so more instances
    would not serve it sooner. It holds. So does a breach with nothing waiting within ``QUEUE_WINDOW_S`` of
    the last tick that had requests waiting: the window's quantile holds that queue's wait."""
    value, quantile = tail  # tail_ttft's
    if value is None or value <= rules.ttft_target:
        return None
    text = f"TTFT {quantile} {latency(value)} > {latency(rules.ttft_target)}"
    if inp.booting > 0:
        return need, f"{text}, {inp.booting} instance(s) still booting"
    waiting = _waiting(inp.signals) or 0.0
    if waiting_before is not None and waiting < waiting_before:
        return need, f"{text}, {num(round(waiting))} waiting, fewer than a tick ago: a backlog being served"
    queued = inp.state.learned.get(QUEUED_T)
    if waiting == 0 and queued is not None and inp.now - queued <= QUEUE_WINDOW_S:
        return need, f"{text}, nothing waiting {dur(inp.now - queued)} after a queue: the window holds its wait"
    if waiting == 0 and inp.current > 0 and busy < TOO_LITTLE * inp.current:  # none booting: all are ready
        return (
            need,
            f"{text} with nothing waiting, the fleet under {TOO_LITTLE:.0%} busy: slow requests, not too few instances",
        )
    per_backlog = per if svc is None else per / svc * DRAIN_S
    extra = max(1, ceil_count(waiting / per_backlog))
    return max(need, inp.current) + extra, f"{text} with {num(round(waiting))} waiting: +{extra}"


def _scale_in(
    rules: ReactiveRules, floor: int, inp: PolicyInput, state: PolicyState, need: int, basis: str, load: Load
) -> Decision:
    now, current = inp.now, inp.current
    highest = _highest_need(state)
    span = hysteresis.window(rules, state.learned)
    window = dur(span)
    if hysteresis.widened(rules, state.learned):
        window += f" (widened from {dur(rules.stabilization)}: scale-ins were undone)"
    window += f", load +{rules.tolerance:.0%}" if rules.tolerance else ""
    if highest >= current:
        detail = f"highest need over {window} {highest}" if need < current else "enough"
        return Decision(current, f"{basis} → {need}; {detail} → hold {current}", state, load.in_flight)
    seen = state.held_for(KNOWN, now)
    if seen < span:
        text = f"{basis} → {need}; load known for {dur(seen)} of the {window} window → hold {current}"
        return Decision(current, text, state, load.in_flight)
    last_in = state.since.get(SCALED_IN)
    if last_in is not None and now - last_in < rules.scale_in_period:
        wait = dur(rules.scale_in_period - (now - last_in))
        text = f"{basis} → {need}; next scale-in step in {wait} → hold {current}"
        return Decision(current, text, state, load.in_flight)
    step = max(1, math.floor(current * rules.scale_in_max_fraction))
    target = max(highest, current - step, floor)
    text = f"{basis} → {need}; highest need over {window} {highest}"  # the window's need, with tolerance
    if target > highest:
        text += f"; at most {step} per {dur(rules.scale_in_period)}"
    state = _since(state, SCALED_IN, now)
    state = replace(state, learned=hysteresis.scaled_in(state.learned, now, target, current))
    return Decision(target, f"{text} → {target}", state, load.in_flight)
