"""Capacity per instance at the SLO: a prior, refined from the fleet's own TTFT-vs-load observations.

Each tick with a settled fleet (the ready count unchanged for ``SETTLE_S``, so the TTFT window saw the
same fleet) files one observation: the load per ready instance, and whether the held TTFT quantile met
the target. The load is the caller's: target tracking passes the window's (arrival rate × service time),
the load the TTFT quantile describes, not a burst's few seconds of pile-up.
Observations go into bins of 5% of the prior, as good/bad weights that halve every ``HALF_LIFE_S``
(so the estimate follows a changed model or traffic mix). Estimate:

- the knee: the split between bins that best separates good below from breached above (the fewest
  observations on the wrong side), so a few unlucky windows are noise, not a knee; it needs a good bin
  below it — TTFT over the target at every load seen is the traffic (long prompts), not capacity;
- capacity: the knee's lower edge, the largest load that kept TTFT under the target;
- no knee seen: the prior, or a load above it that held for ``RAISE_WEIGHT`` observations (minutes,
  not a spike's first seconds);
- clamped to [0.1×, 2×] the prior, and the reason says so.

Small fleets (1, 2, 3 and 4 ready instances) keep bins of their own, apart from the larger fleets' pooled
bins: one server carries a bursty load worse than each of twenty behind a balancer at the same average, so
a capacity learned on a large fleet can be too much for one or two, and a night on one instance would
size the day's twenty at its breach point (pooled, it did: a conversation trace ran a third above its
need all day). ``small_fleet_capacity`` is the load per instance at which a fleet of
that size breached (None until it has), and target tracking never scales in to a small fleet beyond it.

A breach at a load under a fifth of the prior says nothing about capacity (a long prompt, a cold cache):
too little load to tell, not filed. Nor is a good TTFT while requests queue (more than 5% of the load
waiting): the TTFT window lags a load that just rose, and the breach is on its way. Nor, the other way
round, a breach while a backlog drains (fewer waiting than a tick ago) or within ``SETTLE_S`` after it
drained: those first tokens are the backlog's wait, filed against the smaller load that is left; a fleet
that caught up after a cold start would learn a knee at a fraction of its capacity, and keep it, since
the headroom it then holds never runs the fleet there again to refute it. The bins live in
``PolicyState.learned``, persisted with the rest of the state, so a restart keeps what was learned.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from scalectl.policies.common import num

BIN = 0.05  # bin width, as a share of the prior
MAX_BIN = 50  # loads above 2.5× the prior share the last bin
SETTLE_S = 60.0  # a changed ready count must hold this long before TTFT describes it
HALF_LIFE_S = 6 * 3600.0
MIN_WEIGHT = 6.0  # observations a bin needs before it counts
RAISE_WEIGHT = 30.0  # observations a bin above the prior needs before capacity rises to it
TOO_LITTLE = 0.2  # below this share of the prior, a breach is not the load's doing
QUEUEING = 0.05  # more of the load than this waiting: a good TTFT is the window lagging, not capacity
GOOD_SHARE = 0.25  # a bin is good when at most this share of it breached
CLAMP = (0.1, 2.0)

SMALL_FLEET = 4  # fleets of up to this many ready instances keep bins of their own
_PRIOR, _READY, _READY_SINCE, _LAST = "cap.prior", "cap.ready", "cap.ready_since", "cap.t"
_WAITING, _BACKLOG_T = "cap.waiting", "cap.queued_t"  # the last tick's waiting; the last tick with a backlog


@dataclass(frozen=True, slots=True)
class CapacityEstimate:
    per_instance: float  # what the policy divides by
    prior: float
    learned: float | None  # before the clamp; None when nothing is learned (the prior stands)
    text: str  # for reasons and `describe tier`


def _good_key(i: int, size: int = 0) -> str:
    return f"cap.b{i}.good" if not size else f"cap.s{size}.b{i}.good"


def _bad_key(i: int, size: int = 0) -> str:
    return f"cap.b{i}.bad" if not size else f"cap.s{size}.b{i}.bad"


@functools.lru_cache(maxsize=8192)
def _bin_key(key: str) -> tuple[int, int, bool] | None:
    """(fleet size, 0 for every size; bin; whether it counts good observations) of a bin's key, else None.
    Cached: every tick reads each bin key two or three times, and the keys repeat."""
    if not key.startswith(("cap.b", "cap.s")):
        return None
    parts = key.split(".")  # cap.b{i}.good | cap.s{size}.b{i}.bad
    size = int(parts[1][1:]) if parts[1][0] == "s" else 0
    return size, int(parts[-2][1:]), parts[-1] == "good"


def observe(
    learned: Mapping[str, float],
    *,
    now: float,
    prior: float,
    load: float | None,
    ready: int,
    ttft: float | None,
    target: float,
    waiting: float | None = None,
) -> dict[str, float]:
    """File one observation (when it can tell something) and return the new learned figures."""
    out = dict(learned)
    if out.get(_PRIOR) != prior:  # bins are in units of the prior: a new prior starts afresh
        out = {k: v for k, v in out.items() if not k.startswith("cap.")}
        out[_PRIOR] = prior
    draining = load is not None and _draining(out, now=now, load=load, waiting=waiting)
    if out.get(_READY) != ready:
        out[_READY], out[_READY_SINCE] = float(ready), now
        return out
    if ready < 1 or load is None or ttft is None or now - out.get(_READY_SINCE, now) < SETTLE_S:
        return out
    share = load / ready / prior
    breached = ttft > target
    if breached and (share < TOO_LITTLE or draining):
        return out
    if not breached and waiting is not None and waiting > QUEUEING * load:
        return out  # requests queue: TTFT over the window lags, and is about to breach; not evidence it holds
    last = out.get(_LAST)
    if last is not None and now > last:
        factor = 0.5 ** ((now - last) / HALF_LIFE_S)
        out.update({k: round(v * factor, 4) for k, v in out.items() if _bin_key(k) is not None})
    out[_LAST] = now
    i = min(MAX_BIN, int(share / BIN))
    for size in (ready,) if ready <= SMALL_FLEET else (0,):  # a small fleet's breaches are its own (module doc)
        key = _bad_key(i, size) if breached else _good_key(i, size)
        out[key] = out.get(key, 0.0) + 1.0
    return out


def _draining(out: dict[str, float], *, now: float, load: float, waiting: float | None) -> bool:
    """Whether a backlog is being worked off (fewer waiting than at the last tick) or was within the last
    ``SETTLE_S``: a breach then is the backlog's wait. Records this tick's waiting figures in ``out``."""
    if waiting is None:
        return False
    previous = out.get(_WAITING)
    out[_WAITING] = waiting
    backlog = waiting > QUEUEING * load
    if backlog:
        out[_BACKLOG_T] = now
        return previous is not None and waiting < previous
    last = out.get(_BACKLOG_T)
    return last is not None and now - last < SETTLE_S


def _bins(learned: Mapping[str, float], size: int = 0) -> list[tuple[int, float, float]]:
    """(bin, good weight, bad weight) of the well-observed bins, lowest load first: the pooled bins of fleets
    larger than ``SMALL_FLEET``, or (``size``) those of fleets of that many ready instances."""
    weights: dict[int, list[float]] = {}  # bin -> [good, bad]
    for key, value in learned.items():
        parsed = _bin_key(key)
        if parsed is not None and parsed[0] == size:
            weights.setdefault(parsed[1], [0.0, 0.0])[0 if parsed[2] else 1] += value
    return [(i, good, bad) for i, (good, bad) in sorted(weights.items()) if good + bad >= MIN_WEIGHT]


def small_fleet_capacity(learned: Mapping[str, float], prior: float, size: int) -> float | None:
    """The load per instance at which a fleet of ``size`` ready instances breached the target: the lowest
    well-observed bin of that size that mostly breached; None for a larger fleet, or one never seen breach."""
    if not 1 <= size <= SMALL_FLEET or learned.get(_PRIOR) != prior:
        return None
    for i, good, bad in _bins(learned, size):
        if bad > GOOD_SHARE * (good + bad):
            return max(i * BIN * prior, CLAMP[0] * prior)
    return None


def _held_above_prior(rows: list[tuple[int, float, float]]) -> int | None:
    """The highest bin above the prior that held long (``RAISE_WEIGHT`` observations, hardly a breach).
    A load above the prior is usually a spike's onset, held for seconds before its breach shows: raising
    capacity takes minutes of it."""
    found = None
    for i, good, bad in rows:
        if (i + 1) * BIN > 1 and good + bad >= RAISE_WEIGHT and bad <= GOOD_SHARE * (good + bad):
            found = i
    return found


def _knee(rows: list[tuple[int, float, float]]) -> int | None:
    """The split that explains the observations best: good below it, breached from it on. The fewest
    observations on the wrong side wins (ties: the lower knee, the safer one); None when "no knee at all"
    explains them best. Noise on either side costs a few observations; it never moves the split far."""
    best, best_error = None, sum(r[2] for r in rows)  # no knee: every breach is on the wrong side
    bad_below = 0.0
    good_above = sum(r[1] for r in rows)
    seen_good = False  # a knee needs a load that held below it: breaches at every load are not capacity
    for i, good, bad in rows:
        error = bad_below + good_above
        if seen_good and error <= best_error:
            best, best_error = i, error
        seen_good = seen_good or bad <= GOOD_SHARE * (good + bad)
        bad_below += bad
        good_above -= good
    return best


def estimate(learned: Mapping[str, float], prior: float, *, learn: bool = True) -> CapacityEstimate:
    """Capacity per instance from the prior and the observations (see the module docstring)."""
    if not learn:
        return CapacityEstimate(prior, prior, None, f"capacity {num(round(prior, 1))} per instance")
    rows = _bins(learned) if learned.get(_PRIOR) == prior else []
    knee = _knee(rows)
    value: float | None
    above = _held_above_prior(rows)
    ceiling = max(prior, (above + 1) * BIN * prior if above is not None else prior)
    if knee is not None:
        # above the prior only as far as minutes of evidence reach: a spike's first seconds run there calmly
        value = round(min(knee * BIN * prior, ceiling), 6)
        how = f"learned: TTFT breached from {num(round(value, 1))} per instance"
    elif above is not None:
        value = round((above + 1) * BIN * prior, 6)
        how = f"learned: TTFT held at {num(round(value, 1))} per instance"
    else:
        value = None
        how = "prior; no load high enough yet to learn from"
    if value is None:
        return CapacityEstimate(prior, prior, None, f"capacity {num(round(prior, 1))} per instance ({how})")
    low, high = CLAMP[0] * prior, CLAMP[1] * prior
    clamped = min(max(value, low), high)
    note = f"{how}; prior {num(round(prior, 1))}"
    if clamped != value:
        edge = "a tenth of" if clamped == low else "twice"
        note += f"; {num(round(value, 1))} clamped to {edge} the prior"
    clamped = max(clamped, 1e-9)
    return CapacityEstimate(clamped, prior, value, f"capacity {num(round(clamped, 1))} per instance ({note})")


def summary(learned: Mapping[str, float]) -> list[tuple[float, float]]:
    """The well-observed bins as (load per instance, share of breaches), lowest first, for `describe tier`."""
    prior = learned.get(_PRIOR)
    if not prior:
        return []
    return [(round(i * BIN * prior, 1), round(bad / (good + bad), 3)) for i, good, bad in _bins(learned)]


_SERVICE = "svc.time"
SERVICE_HALF_LIFE_S = 600.0
HEALTHY_WAITING = 0.05  # share of the requests in flight that may wait in a tick that times service
STEADY = 0.2  # the last ticks' rate within this share of the window's: a steady tick


def observe_service_time(
    learned: Mapping[str, float], *, now: float, in_flight: float | None, waiting: float | None, rate: float | None,
    ttft_ok: bool,
) -> dict[str, float]:  # fmt: skip
    """Time a request spends in flight when nothing queues (in flight ÷ arrival rate, Little's law), as a
    moving average with a 10-minute half-life; only from healthy, steady ticks: an overload's backlog is
    wait, not service, and while the rate moves (the reading window lags the last ticks by more than 20%)
    in flight and rate describe different moments."""
    out = dict(learned)
    if not ttft_ok or in_flight is None or not rate or rate <= 0 or in_flight <= 0:
        return out
    fast = out.get(_FAST)
    if fast is None or abs(fast - rate) > STEADY * rate:
        return out
    if (waiting or 0.0) > HEALTHY_WAITING * in_flight:
        return out
    sample = in_flight / rate
    previous, last = out.get(_SERVICE), out.get(_SERVICE + ".t")
    if previous is None or last is None:
        out[_SERVICE] = round(sample, 4)
    else:
        keep = 0.5 ** (max(0.0, now - last) / SERVICE_HALF_LIFE_S)
        out[_SERVICE] = round(keep * previous + (1 - keep) * sample, 4)
    out[_SERVICE + ".t"] = now
    return out


def service_time(learned: Mapping[str, float]) -> float | None:
    return learned.get(_SERVICE)


def service_time_waiting(running: float | None, waiting: float | None, finish_rate: float | None) -> float | None:
    """A request's time in service while requests wait: running ÷ finished per second (Little's law on the
    running part; the waiting ones are not in service). None unless requests wait and some finish. A full
    batch runs each step slower than a healthy one, so this is longer than the service time at the target
    load, and a need sized with it errs high; it stands in only until ``observe_service_time`` has one."""
    if not running or running <= 0 or not waiting or waiting <= 0 or not finish_rate or finish_rate <= 0:
        return None
    return running / finish_rate


_FAST, _FAST_T = "rate.fast", "rate.t"
FAST_HALF_LIFE_S = 30.0


def observe_fast_rate(learned: Mapping[str, float], *, now: float, arrivals: float | None) -> dict[str, float]:
    """Arrivals per second over the last few ticks (30-second half-life), from the per-tick arrival count:
    a spike shows within a tick or two instead of after the reading window (a minute) fills."""
    out = dict(learned)
    last = out.get(_FAST_T)
    out[_FAST_T] = now
    if arrivals is None:
        out.pop(_FAST, None)  # a gap: start afresh, never carry an old rate across it
        return out
    if last is None or now <= last:
        return out
    sample = arrivals / (now - last)
    keep = 0.5 ** ((now - last) / FAST_HALF_LIFE_S)
    previous = out.get(_FAST)
    out[_FAST] = round(sample if previous is None else keep * previous + (1 - keep) * sample, 4)
    return out


def fast_rate(learned: Mapping[str, float]) -> float | None:
    return learned.get(_FAST)


def last_tick(learned: Mapping[str, float]) -> float | None:
    """When the previous tick's arrivals were counted (``observe_fast_rate``)."""
    return learned.get(_FAST_T)
