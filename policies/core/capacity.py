"""Capacity per instance at the SLO, in rate units: the engine model's figure as a prior, learned from the
fleet in both directions.

Every tick with a settled fleet (the ready count unchanged for ``SETTLE_S``) files the rate per ready
instance, whether the held TTFT quantile met the target and, when it did, 1/TTFT, in bins of ``BIN`` of
the prior fading with a ``CAP_HALF_LIFE_S`` half-life. A window that held is filed at the baseline rate (it
held at least that); one that breached at the highest rate the window saw (a burst the baseline still lags
broke it, not the baseline), or at the highest the current backlog arrived under (its requests still wait,
and for a reading window after it is served the window's quantile still holds them).
Not filed: a breach whose baseline is below ``TOO_LITTLE`` of the prior (a slow request, not load), one
while a backlog drains (that wait is the backlog's), and a p99 breach with the p95 within the target and
nothing waiting (a few requests slow by themselves, such as a long prompt's prefill: queueing delays most).

- **Down**: the lowest well-observed bin that mostly breached, above one that held, is the knee. Only a
  knee brings the figure below the prior: a fleet that held has not shown where it breaks.
- **Either way**: below the knee, latency is fitted against load over the range observed. A queue's
  latency grows like L0 / (1 − x/C), so 1/TTFT falls linearly in x (the same straight line Dynamo's
  planner corrects its profile with): where that line reaches the target is the capacity. A fleet that
  never nears its knee learns it can carry more, but never more than ``EXTRAPOLATE`` × the highest load
  it was seen holding (so it walks up as it is sized on each new figure), and never less than that load.
- Clamped to ``CLAMP`` × the prior, and the text says so. Too little evidence: the prior, and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scalectl.policies.common import latency
from scalectl.policies.core.constants import (
    BAD_SHARE,
    BIN,
    CAP_HALF_LIFE_S,
    CLAMP,
    EXTRAPOLATE,
    FIT_SPAN,
    MAX_BIN,
    MIN_WEIGHT,
    SETTLE_S,
    STABLE_HALF_LIFE_S,
    TOO_LITTLE,
)


@dataclass(frozen=True, slots=True)
class CapacityState:
    prior: float | None = None  # the prior the bins are in units of: a new one starts afresh
    ready: int | None = None
    ready_since: float | None = None
    waiting: float | None = None  # the last tick's backlog: a shrinking one is being served
    last_t: float | None = None  # when the bins last faded
    bins: Mapping[int, tuple[float, float, float]] = field(default_factory=dict)  # bin → (good, bad, Σ 1/TTFT)
    # the highest load per ready instance since the current backlog began (None: nothing waits): the load its
    # queued requests arrived under, which their latency still shows after the load has fallen, and for a
    # reading window after the backlog is gone (the window's quantile still holds the requests that waited)
    backlog_peak: float | None = None
    backlog_at: float | None = None  # the last tick anything waited

    def to_dict(self) -> dict[str, Any]:
        return {
            "prior": self.prior,
            "ready": self.ready,
            "ready_since": self.ready_since,
            "waiting": self.waiting,
            "last_t": self.last_t,
            "bins": {str(i): list(v) for i, v in self.bins.items()},
            "backlog_peak": self.backlog_peak,
            "backlog_at": self.backlog_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CapacityState:
        data = data or {}
        bins = {int(i): (float(g), float(b), float(s)) for i, (g, b, s) in (data.get("bins") or {}).items()}
        ready = data.get("ready")
        return cls(
            data.get("prior"),
            None if ready is None else int(ready),
            data.get("ready_since"),
            data.get("waiting"),
            data.get("last_t"),
            bins,
            data.get("backlog_peak"),
            data.get("backlog_at"),
        )


@dataclass(frozen=True, slots=True)
class Capacity:
    per_instance: float  # units/s one instance carries at the SLO
    ratio: float  # per_instance ÷ prior
    how: str  # for the reason: "learned", "prior; …"


def observe(
    state: CapacityState,
    *,
    now: float,
    prior: float,
    rate: float,
    ready: int,
    ttft: float | None,
    target: float,
    waiting: float | None,
    peak: float = 0.0,
    body: float | None = None,
) -> CapacityState:
    """``rate``: the baseline arrival rate; ``peak``: the highest rate of the reading window (``DemandState.peak``)."""
    bins = dict(state.bins) if state.prior == prior else {}
    draining = waiting is not None and state.waiting is not None and waiting < state.waiting
    settled = state.ready == ready and state.ready_since is not None and now - state.ready_since >= SETTLE_S
    since = state.ready_since if state.ready == ready else now
    load = max(rate, peak) / max(ready, 1)
    backlog_at = now if waiting else state.backlog_at
    recent = backlog_at is not None and now - backlog_at <= STABLE_HALF_LIFE_S  # still in the reading window
    backlog_peak = max(load, state.backlog_peak or 0.0) if waiting else (state.backlog_peak if recent else None)
    base = CapacityState(prior, ready, since, waiting, state.last_t, bins, backlog_peak, backlog_at)
    if not settled or ready < 1 or ttft is None:
        return base
    breached = ttft > target
    if breached and (rate / ready / prior < TOO_LITTLE or draining):  # a slow request under a light baseline
        return base
    if breached and body is not None and body <= target and not waiting:  # a few slow requests, nobody queued
        return base
    share = (max(load, backlog_peak or 0.0) if breached else rate / ready) / prior
    if state.last_t is not None and now > state.last_t:
        fade = 0.5 ** ((now - state.last_t) / CAP_HALF_LIFE_S)
        bins = {i: (g * fade, b * fade, s * fade) for i, (g, b, s) in bins.items()}
    i = min(MAX_BIN, int(share / BIN + 1e-9))  # 6.0 / 10 / 0.05 is 11.999…: bin 12
    g, b, s = bins.get(i, (0.0, 0.0, 0.0))
    bins[i] = (g, b + 1, s) if breached else (g + 1, b, s + 1 / max(ttft, 1e-6))
    return CapacityState(prior, ready, since, waiting, now, bins, backlog_peak, backlog_at)


def used(state: CapacityState, prior: float, target: float, *, learn: bool) -> Capacity:
    """What sizing divides by: the learned figure, or the prior as set when learning is off."""
    return estimate(state, prior, target) if learn else Capacity(prior, 1.0, "set; not learned")


def estimate(state: CapacityState, prior: float, target: float) -> Capacity:
    rows = sorted((i, g, b, s) for i, (g, b, s) in state.bins.items() if g + b >= MIN_WEIGHT)
    if state.prior != prior:
        rows = []
    held = [b <= BAD_SHARE * (g + b) for _, g, b, _ in rows]
    knee = next((i for n, (i, _, _, _) in enumerate(rows) if not held[n] and any(held[:n])), None)
    good = [(i, g, s) for n, (i, g, _, s) in enumerate(rows) if held[n] and (knee is None or i < knee)]
    fitted, fit_how = _fit(good, prior, target)
    if knee is not None:
        # between the last bin that held and the knee nothing was seen: no further than the fit reaches, and
        # without a fit no further than the highest load held (the prior, when the knee lies above it)
        top = max((i + 1 for i, _, _ in good), default=knee) * BIN * prior
        knee_at = min(knee * BIN * prior, max(top, prior if knee * BIN >= 1 else 0.0))
        value = knee_at if fitted is None else min(knee * BIN * prior, max(knee_at, fitted))
        how = f"learned: TTFT breached from {value:.3g}" if fitted is None or fitted >= knee_at else fit_how
    elif fitted is not None and fitted >= prior:
        value, how = fitted, fit_how
    elif fitted is not None:  # down only on breaches seen: a fleet that held has not shown where it breaks
        return Capacity(prior, 1.0, f"prior; the fit reaches the target at {fitted:.3g}, but no breach was seen")
    else:
        return Capacity(prior, 1.0, "prior; " + fit_how)
    low, high = CLAMP[0] * prior, CLAMP[1] * prior
    clamped = min(max(value, low), high)
    if clamped != value:
        how += f"; {value:.3g} clamped to {'a tenth of' if clamped == low else 'twice'} the prior"
    return Capacity(clamped, clamped / prior, how)


def _fit(good: list[tuple[int, float, float]], prior: float, target: float) -> tuple[float | None, str]:
    """Where 1/TTFT, fitted linearly against the load over the bins that held, reaches 1/target; bounded by
    the evidence: at least the highest load held, at most ``EXTRAPOLATE`` × that."""
    if len(good) < 2 or (good[-1][0] - good[0][0]) * BIN < FIT_SPAN:
        return None, "no range of loads to fit latency against yet"
    points = [((i + 0.5) * BIN * prior, s / g, g) for i, g, s in good]  # (load, mean 1/TTFT, weight)
    w = sum(p[2] for p in points)
    mx, my = sum(x * n for x, _, n in points) / w, sum(y * n for _, y, n in points) / w
    sxx = sum(n * (x - mx) ** 2 for x, _, n in points)
    slope = sum(n * (x - mx) * (y - my) for x, y, n in points) / sxx
    held = (good[-1][0] + 1) * BIN * prior
    reach = EXTRAPOLATE * held
    at_target = mx + (1 / target - my) / slope if slope < 0 else reach
    if at_target > reach:  # the evidence does not reach the knee: up to its bound, never below the prior
        value = max(prior, reach)
        return (
            value,
            f"learned: TTFT fit reaches {latency(target)} beyond {value:.3g}"
            f" (bounded: {EXTRAPOLATE:g}× the {held:.3g} held)",
        )
    value = max(held, at_target)
    bound = ""
    return value, f"learned: TTFT fit reaches {latency(target)} at {value:.3g}{bound}"
