"""Replay stopping rules on a search whose trials were all run out (``bench_tune.py --save``).

Each trial's cost and misses at every checkpoint are known, so any rule can be tried after the fact: the
trials are taken in order, each bounded by the best trial finished before it was submitted (``jobs`` run at
once), and stopped at the first checkpoint the rule names. A trial the pace stopped that met the SLO
cheaper than the best of its time is a wrong stop: the search would have kept it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scalectl.simulator.controller_run import Checkpoint
from scalectl.simulator.tune import Bound, PaceRule


@dataclass(frozen=True, slots=True)
class Replayed:
    rule: str
    hours: float  # simulated hours the search would have run
    stopped_by_bound: int
    stopped_by_pace: int
    wrong_stops: int  # the pace stopped a trial that would have become the best
    best_cost: float | None
    best_slo: float | None


def replay(saved: dict[str, Any], slo: float, rule: PaceRule | None, *, jobs: int = 2) -> Replayed:
    duration, requests = float(saved["duration"]), int(saved["requests"])
    allowed = int((1 - slo) * requests)
    trials = sorted(saved["trials"], key=lambda t: t["number"])
    kept: list[dict[str, Any]] = []  # trials that ran out in the replay
    hours = 0.0
    by_bound = by_pace = wrong = 0
    for i, trial in enumerate(trials):
        known = [t for t in kept if t["number"] <= i - jobs and t["slo"] >= slo]
        best = min(known, key=lambda t: t["cost"]) if known else None
        pace = rule.behind(best["spent"], duration) if best is not None and rule is not None else None
        bound = Bound(best["cost"] if best is not None else None, allowed, pace)
        stopped_at, why = None, None
        for t, cost, misses in trial["spent"]:
            reason = bound.reason("tier", Checkpoint(t, {"tier": cost}, {"tier": (0, misses)}))
            if reason is not None:
                stopped_at, why = t, reason
                break
        if stopped_at is None:
            kept.append(trial)
            hours += duration / 3600
            continue
        hours += stopped_at / 3600
        if why is not None and why.endswith("(pace)"):
            by_pace += 1
            if trial["slo"] >= slo and (best is None or trial["cost"] < best["cost"]):
                wrong += 1
        else:
            by_bound += 1
    feasible = [t for t in kept if t["slo"] >= slo]
    top = min(feasible, key=lambda t: t["cost"]) if feasible else None
    name = "exact bounds only" if rule is None else f"pace: {rule.margin:.0%} after {rule.warmup:.0%}"
    return Replayed(name, hours, by_bound, by_pace, wrong, top["cost"] if top else None, top["slo"] if top else None)
