"""Target mode (the default of min-floor and of predictive's reactive part): the tier's readings turned into
the decision core's measures (policies/core/, docs/decision-core.md), and its state kept in the policy's.

Measures, each with a capacity prior in its own units (the larger need wins, as an HPA with two metrics):
- **requests** (vLLM tiers): requests arrived since the last tick. One instance carries ``capacity`` (or the
  KV/engine prior, `scalectl plan`) requests in flight at the SLO, so ``capacity ÷ service time`` per second,
  with the service time measured by Little's law on the running requests (running ÷ finished per second).
  The prior moves only when the measured service time drifts past ``SERVICE_DRIFT`` (a new prior restarts
  what capacity has learned, so it must not move with every tick's noise).
- **tokens** (vLLM tiers): prompt tokens not found in the prefix cache plus tokens generated, against the
  engine model's compute (`compute_prior`) at ``KNEE_SHARE`` of it: a queue's tail grows before the limit.
- **in flight**: work running plus waiting as a level, against ``capacity`` in flight: alone where there is
  no arrival count (a Celery queue, recorded rows without rates), beside the requests where their prior
  cannot be formed yet (no service time measured: a source without finishes, a fresh tier). A level of
  Poisson work has Poisson noise (M/G/∞), so the surge test holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from scalectl.policies.common import dur, num
from scalectl.policies.core import behaviour
from scalectl.policies.core.constants import KNEE_SHARE
from scalectl.policies.core.pipeline import CoreInputs, CoreState, Reading, decide
from scalectl.policies.spec import ReactiveRules
from scalectl.policies.types import Decision, PolicyInput, Signals

SERVICE_HALF_LIFE_S = 600.0  # the measured service time follows a new traffic mix within minutes
SERVICE_DRIFT = 0.25  # the requests prior follows the service time once it has moved this far
SERVICE_MIN_FINISHED = 100.0  # requests finished (fading) before a service time is believed: a fresh window misleads
_SVC_BUSY, _SVC_DONE, _SVC_T, _SVC_REF = "svc.busy", "svc.done", "svc.t", "svc.ref"
_TPR_REF = "tpr.ref"  # tokens computed per request, moved only past SERVICE_DRIFT (as the service time)


def tail_ttft(rules: ReactiveRules, signals: Signals) -> tuple[float | None, str]:
    """The TTFT quantile the tier is held to (``ttft_quantile``) and its name; p95 where no p99 is given."""
    if rules.ttft_quantile >= 0.99 and signals.ttft_p99_s is not None:
        return signals.ttft_p99_s, "p99"
    return signals.ttft_p95_s, "p95"


def computed_tokens(signals: Signals) -> float | None:
    """Tokens per second the tier's engines compute: prompt tokens not found in the prefix cache, plus the
    tokens generated. None when the prompt token rate is unknown; an unknown hit rate counts every prompt
    token (the cautious reading), an unknown generation rate counts none (the prompt dominates the compute)."""
    prompt = signals.prompt_tokens_rate
    if prompt is None:
        return None
    hit = min(max(signals.prefix_cache_hit_rate or 0.0, 0.0), 1.0)
    return prompt * (1.0 - hit) + (signals.generation_tokens_rate or 0.0)


def evaluate(rules: ReactiveRules, floor: int, inp: PolicyInput) -> Decision:
    signals = inp.signals
    learned = _observe_tokens_per_request(_observe_service(inp.state.learned, inp.now, signals), signals)
    core = inp.state.core if inp.state.core is not None else CoreState()
    tick_s = inp.now - core.last_t if core.last_t is not None and inp.now > core.last_t else None
    readings = _readings(rules, inp, learned, tick_s)
    held, held_name = tail_ttft(rules, signals)
    known = any(r.count is not None for r in readings)
    inputs = CoreInputs(
        readings=readings,
        current=inp.current,
        ready=inp.current - inp.booting,
        floor=floor,
        ttft_s=held,
        ttft_body_s=signals.ttft_p95_s if held_name == "p99" else None,
        ttft_target_s=rules.ttft_target,
        horizon_s=inp.boot_time,
        read_at=inp.now if known else None,
        pace=behaviour.Pace(rules.stabilization, rules.scale_in_max_fraction, rules.scale_in_period, rules.idle_after),
        learn=learns(rules),
    )
    desired, reason, core = decide(inputs, core, inp.now)
    waiting = (signals.requests_waiting or 0.0) + (signals.queue_depth or 0.0)
    if desired == 0 and waiting > 0:  # scale from zero: work held (the activator) or queued needs one
        desired, reason = 1, f"{reason}; work waiting with no instance → 1"
    state = replace(inp.state, learned=learned, core=core)
    return Decision(desired, reason, state, signals.request_rate)


def learns(rules: ReactiveRules) -> bool:
    """Capacity is learned from the fleet unless the policy sets `capacity` or turns learning off."""
    return rules.learn_capacity and rules.capacity is None


def _level(signals: Signals) -> float | None:
    """Work in flight, running and waiting: vLLM's gauges, else a queue's (Celery) counts; None when half is
    unknown, and when neither is read at all (then the arrivals decide)."""
    running, waiting = signals.requests_running, signals.requests_waiting
    if running is not None and waiting is None:
        waiting = signals.queue_depth  # work asked for and not yet served, held in front of vLLM
    if running is not None or waiting is not None:
        return None if running is None or waiting is None else running + waiting
    depth, in_flight = signals.queue_depth, signals.in_flight
    return None if depth is None or in_flight is None else depth + in_flight


def service_time(learned: Mapping[str, float]) -> float | None:
    """The service time the requests prior uses (seconds), None until measured."""
    return learned.get(_SVC_REF)


def _readings(
    rules: ReactiveRules, inp: PolicyInput, learned: dict[str, float], tick_s: float | None
) -> tuple[Reading, ...]:
    signals = inp.signals
    in_flight_prior = rules.capacity if rules.capacity is not None else inp.capacity_prior
    level = _level(signals)
    how = "" if in_flight_prior is not None else "set policy `capacity` (work in flight one instance serves)"
    in_flight = Reading(
        "in flight",
        "in flight",
        None if level is None or tick_s is None else level * tick_s,
        in_flight_prior,
        how,
        grain=tick_s or 1.0,
    )
    if signals.arrivals is None and level is not None:  # work in flight, no arrival count: the level alone
        return (in_flight,)
    svc = service_time(learned)
    if in_flight_prior is None:
        req_prior, req_how = None, "set policy `capacity` (requests in flight one instance serves)"
    elif svc is None:
        req_prior, req_how = None, "service time not measured yet"
    else:
        req_prior = in_flight_prior / svc
        req_how = f"{num(round(in_flight_prior, 1))} in flight ÷ {dur(svc)} service"
        per_request_ref = learned.get(_TPR_REF)
        if rules.capacity is None and inp.compute_prior is not None and per_request_ref:
            # the engine computes only so many tokens: long prompts bind it long before the sequence slots do
            by_compute = inp.compute_prior * KNEE_SHARE / per_request_ref
            if by_compute < req_prior:
                req_prior = by_compute
                req_how = (
                    f"{num(round(inp.compute_prior * KNEE_SHARE))} tokens/s ÷ {num(round(per_request_ref))} per request"
                )
    requests = Reading("requests", "req/s", signals.arrivals, req_prior, req_how, backlog=signals.requests_waiting)
    # Until a service time is measured (or where the source gives no finishes) the level in flight stands in.
    rates = (requests, in_flight) if req_prior is None and level is not None else (requests,)
    tokens_rate = computed_tokens(signals)
    if tokens_rate is None:  # not reported (an engine without token counters, or no instance answering)
        return rates
    per_request = tokens_rate / signals.request_rate if tokens_rate and signals.request_rate else None
    # This tick's arrivals at the window's tokens per request: the window's token rate alone would smear a
    # two-minute burst over the window, and the mix per request moves far slower than the arrivals do.
    count: float | None
    if per_request is not None and signals.arrivals is not None:
        count = signals.arrivals * per_request
    else:
        count = None if tick_s is None else tokens_rate * tick_s
    tokens = Reading(
        "tokens",
        "tokens/s",
        count,
        None if inp.compute_prior is None else inp.compute_prior * KNEE_SHARE,
        "" if inp.compute_prior is not None else "no compute figure for this model and GPU",
        grain=max(1.0, per_request or 1.0),
        backlog=None
        if signals.requests_waiting is None or per_request is None
        else signals.requests_waiting * per_request,
    )
    return (*rates, tokens)


def _observe_tokens_per_request(learned: dict[str, float], signals: Signals) -> dict[str, float]:
    """The tokens one request costs the engine (computed tokens ÷ requests, per second), kept as a reference
    that moves only past ``SERVICE_DRIFT``: the requests prior is bound by it, and a prior that moved with
    every tick's mix would restart what capacity has learned each time."""
    tokens, requests = computed_tokens(signals), signals.request_rate
    if not tokens or not requests:
        return learned
    ref = learned.get(_TPR_REF)
    followed = _followed(ref, tokens / requests, digits=1)
    return learned if followed == ref else {**learned, _TPR_REF: followed}


def _followed(ref: float | None, measured: float, *, digits: int) -> float:
    """A prior's reference: the measured figure (rounded to ``digits``) once it drifts past ``SERVICE_DRIFT``
    (or at first), else as it was. A new prior restarts what capacity has learned, so it must not move with
    every tick's noise."""
    if ref is None or abs(math.log(measured / ref)) > math.log(1 + SERVICE_DRIFT):
        return round(measured, digits)
    return ref


def _observe_service(learned: Mapping[str, float], now: float, signals: Signals) -> dict[str, float]:
    """Service time by Little's law on the running requests: Σ running × dt ÷ Σ finished, both fading with
    ``SERVICE_HALF_LIFE_S``, over ticks where nothing waits. A ratio of sums, not an average of ratios: a tick
    whose window has seen few finishes (a fresh reading, a restart) weighs as little as it knows. The reference
    the prior uses moves only when the figure drifts past ``SERVICE_DRIFT``, once ``SERVICE_MIN_FINISHED`` have
    finished."""
    out = dict(learned)
    running, finished, last = signals.requests_running, signals.finish_rate, out.get(_SVC_T)
    out[_SVC_T] = now
    if running is None or finished is None or last is None or not now > last:
        return out
    if signals.requests_waiting:  # an overload: a full batch runs slow, and the finish window lags the fill
        return out
    dt = now - last
    keep = 0.5 ** (dt / SERVICE_HALF_LIFE_S)
    busy = keep * out.get(_SVC_BUSY, 0.0) + max(running, 0.0) * dt
    done = keep * out.get(_SVC_DONE, 0.0) + max(finished, 0.0) * dt
    out[_SVC_BUSY], out[_SVC_DONE] = round(busy, 4), round(done, 4)
    if done < SERVICE_MIN_FINISHED or busy <= 0:
        return out
    out[_SVC_REF] = _followed(out.get(_SVC_REF), busy / done, digits=4)
    return out
