"""Rolling replacements during a simulation (the workload's ``rollouts:``): each one is `scalectl rollout
restart` at its time, through the store as the command does; the reconciler then replaces the tier's
instances exactly as in production. The report says how long it rolled, the SLO of the requests that
arrived meanwhile against the rest of the run, and what the tier billed while it rolled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalectl.controller.store.repository import Store
from scalectl.controller.views.rollout_status import rollout_status
from scalectl.simulator.fleet import Fleet
from scalectl.simulator.report import RolloutOutcome
from scalectl.simulator.workloads.spec import RolloutEvent


@dataclass
class _Span:
    tier: str
    at: float
    started: float | None = None
    finished: float | None = None


class RolloutClock:
    def __init__(self, events: Sequence[RolloutEvent]) -> None:
        self._spans = [_Span(e.tier, e.at) for e in sorted(events, key=lambda e: e.at)]

    def start_due(self, store: Store, t: float, now: float) -> None:
        """Restart the rollouts whose time has come (t: seconds after the start; now: the store's clock)."""
        for span in self._spans:
            if span.started is None and t >= span.at:
                store.rollouts.set(span.tier, now, restart=True)
                span.started = t

    def finish_done(self, store: Store, t: float) -> None:
        for span in self._spans:
            if span.started is not None and span.finished is None:
                status = rollout_status(store, span.tier)
                if status is not None and status["drifted"] == 0:
                    span.finished = t

    def spans(self) -> list[tuple[str, float, float | None]]:
        return [(s.tier, s.started, s.finished) for s in self._spans if s.started is not None]


def rollout_outcomes(
    fleet: Fleet, spans: Sequence[tuple[str, float, float | None]], duration_s: float
) -> list[RolloutOutcome]:
    out = []
    for tier, started, finished in spans:
        end = duration_s if finished is None else finished
        during, outside = _slo_split(fleet, tier, started, end)
        hours, peak, before = _billing(fleet, tier, started, end)
        out.append(RolloutOutcome(tier, started, finished, during, outside, hours, peak, before))
    return out


def _slo_split(fleet: Fleet, tier: str, start: float, end: float) -> tuple[float | None, float | None]:
    """SLO attainment of the requests that arrived in [start, end) and of the others (served ones only)."""
    pool = fleet.serving.get(tier)
    if pool is None:
        return None, None
    rec = pool.record
    at = np.concatenate(rec.ttft_at) if rec.ttft_at else np.empty(0)
    ttft = np.concatenate(rec.ttft) if rec.ttft else np.empty(0)
    met = ttft <= fleet.models[tier].load.ttft_target  # type: ignore[union-attr]
    inside = (at >= start) & (at < end)

    def share(mask: np.ndarray) -> float | None:
        n = int(mask.sum())
        return float(met[mask].sum() / n) if n else None

    return share(inside), share(~inside)


def _billing(fleet: Fleet, tier: str, start: float, end: float) -> tuple[float, int, int]:
    """Instance-hours billed in [start, end), the peak count in it, and the count when it began."""
    timeline = fleet.meters[tier].billed_timeline  # (end of tick, instances billing during it)
    hours, peak, before, last = 0.0, 0, 0, 0.0
    for t1, count in timeline:
        t0, last = last, t1
        if t1 <= start:
            before = count
            continue
        if t0 >= end:
            break
        hours += count * (min(t1, end) - max(t0, start)) / 3600.0
        peak = max(peak, count)
    return hours, peak, before
