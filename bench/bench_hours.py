"""Where a day's SLO and money go, hour by hour: the controller's requests missed and instances billed beside
the oracle's instances (the fewest each minute at which the SLO holds, no boot time).

A whole-day figure (99.49% at 1.27× oracle) does not say whether the misses are one spike's boot minutes or
a tail all day long, nor whether the extra cost is standing headroom, a scale-in that lags a decline, or a
window that holds an hour's peak. This table does. It runs the controller only (no baselines but the
oracle's need timeline).

From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_hours.py fleet-business-day                     # a scenario of bench_scenarios.py
    python bench/bench_hours.py -f tiers.yaml -w day.yaml --seed 12    # any tiers and workload files

Per hour and tier: requests judged, requests missed (TTFT over the target) and their share, the mean
instances billed, the oracle's mean need, and their ratio; then the day's totals and the worst minutes.
Trace files are read from $SCALECTL_TRACES when set, else from the shared traces folder beside the
repository.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from bench_scenarios import EXAMPLES, SCENARIOS

from scalectl.simulator.baselines import NEED_STEP_S, need_timeline
from scalectl.simulator.controller_run import RunOptions, models_for, simulate
from scalectl.simulator.report import pct
from scalectl.simulator.workloads.spec import BatchLoad, load_workload
from scalectl.tiers.config import load_config

WORST = 12  # minutes listed at the end


def hourly(
    series: dict[str, np.ndarray], need: np.ndarray, duration_s: float
) -> list[tuple[int, int, int, float, float]]:
    """Rows of (hour, requests judged, missed, mean instances billed, the oracle's mean need)."""
    hours = int(np.ceil(duration_s / 3600.0))
    minute = (series["t_q"] // 60.0).astype(np.int64)
    judged = np.bincount(minute // 60, weights=series["judged"], minlength=hours)[:hours]
    missed = np.bincount(minute // 60, weights=series["missed"], minlength=hours)[:hours]
    t = series["t"]
    hour_of_tick = np.minimum((t // 3600.0).astype(np.int64), hours - 1)
    billed = series.get("billed", series["ready"])
    ticks = np.bincount(hour_of_tick, minlength=hours)[:hours]
    billed_mean = np.bincount(hour_of_tick, weights=billed, minlength=hours)[:hours] / np.maximum(ticks, 1)
    per_hour = round(3600.0 / NEED_STEP_S)
    padded = np.zeros(hours * per_hour)
    padded[: min(need.shape[0], padded.shape[0])] = need[: padded.shape[0]]
    oracle_mean = padded.reshape(hours, per_hour).mean(axis=1)
    return [(h, int(judged[h]), int(missed[h]), float(billed_mean[h]), float(oracle_mean[h])) for h in range(hours)]


def report(name: str, series: dict[str, np.ndarray], need: np.ndarray, duration_s: float) -> str:
    rows = hourly(series, need, duration_s)
    lines = [f"{name}: hour, requests, missed, missed share, instances billed, oracle's need, ratio"]
    for h, judged, missed, billed, oracle in rows:
        share = missed / judged if judged else None
        ratio = f"{billed / oracle:.2f}×" if oracle else "-"
        lines.append(f"  {h:>4} {judged:>10,} {missed:>8,} {pct(share):>8} {billed:>7.2f} {oracle:>7.2f} {ratio:>7}")
    judged_all, missed_all = sum(r[1] for r in rows), sum(r[2] for r in rows)
    billed_h, oracle_h = sum(r[3] for r in rows), sum(r[4] for r in rows)  # an hour's mean: instance-hours
    met = pct(1 - missed_all / judged_all) if judged_all else "-"
    ratio_day = f" ({billed_h / oracle_h:.2f}×)" if oracle_h else ""
    lines.append(
        f"  day: {judged_all:,} requests, {missed_all:,} missed ({met} met); {billed_h:,.1f} instance-hours"
        f" billed, the oracle's {oracle_h:,.1f}{ratio_day}"
    )
    worst = np.argsort(series["missed"])[::-1][:WORST]
    listed = ", ".join(
        f"{int(series['t_q'][i] // 3600):02d}:{int(series['t_q'][i] % 3600 // 60):02d} {int(series['missed'][i]):,}"
        for i in sorted(worst.tolist())
        if series["missed"][i] > 0
    )
    lines.append(f"  worst minutes (missed): {listed or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", nargs="?", choices=sorted(SCENARIOS), help="a scenario of bench_scenarios.py")
    parser.add_argument("-f", "--file", type=Path, help="tiers file (instead of a scenario)")
    parser.add_argument("-w", "--workload", type=Path, help="workload file (with -f)")
    parser.add_argument("--seed", type=int, default=None, help="override the workload's seed")
    args = parser.parse_args(argv)
    if args.scenario is not None:
        tiers_file, workload_file = (EXAMPLES / part for part in SCENARIOS[args.scenario])
    elif args.file is not None and args.workload is not None:
        tiers_file, workload_file = args.file, args.workload
    else:
        parser.error("name a scenario, or give both -f TIERS and -w WORKLOAD")
    config, text = load_config(tiers_file)
    workload = load_workload(workload_file)
    if args.seed is not None:
        workload = workload.model_copy(update={"seed": args.seed})
    result = simulate(config, text, workload, options=RunOptions(baselines=False), workload_source=str(workload_file))
    series_by_tier = result.report.series()
    models = models_for(config, workload, str(workload_file))
    for name, model in models.items():
        if isinstance(model.load, BatchLoad) or "missed" not in series_by_tier.get(name, {}):
            print(f"{name}: a batch tier (or no request finished): nothing to break down", file=sys.stderr)
            continue
        _, need = need_timeline(workload, model)
        print(report(name, series_by_tier[name], need, workload.duration))
    return 0


if __name__ == "__main__":
    sys.exit(main())
