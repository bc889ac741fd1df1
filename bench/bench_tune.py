"""What `scalectl tune` costs: the same search with trials stopped early (the default) and run to the end.

From the repository root (project installed with the tune extra, or PYTHONPATH=.):
    python bench/bench_tune.py                                   # business day 06:00-10:00, 20 trials, 2 jobs
    python bench/bench_tune.py fleet-azure-conversation --from 9 --hours 3 --trials 30

Prints, per mode: wall seconds, trials stopped early, the best cost and SLO found, and the simulated hours
actually run (a stopped trial runs only up to where it could no longer win). Both modes use one search seed;
each trial's outcome does not depend on the mode, but stopped trials tell the sampler less than finished
ones, so the two searches may propose different settings after the first stop.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench_scenarios import EXAMPLES, SCENARIOS, window
from tune_replay import replay

from scalectl.simulator.tune import PACE, PaceRule, TuneResult, tune
from scalectl.simulator.workloads.spec import load_workload
from scalectl.tiers.config import load_config


def simulated_hours(result: TuneResult, hours: float) -> float:
    """Hours of traffic the search simulated: whole trials, and stopped ones up to where they stopped."""
    return sum(hours if t.stopped_at is None else t.stopped_at / 3600 for t in result.trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", nargs="?", default="fleet-business-day", choices=sorted(SCENARIOS))
    parser.add_argument("--from", dest="from_h", type=float, default=6.0, help="start H hours into the scenario")
    parser.add_argument("--hours", type=float, default=4.0, help="hours of traffic per trial")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--slo", type=float, default=0.995)
    parser.add_argument("--save", type=Path, help="run every trial out once and save them here (for --replay)")
    parser.add_argument("--replay", type=Path, help="replay stopping rules on trials saved by --save")
    args = parser.parse_args()
    if args.replay is not None:
        print_replay(load_saved(args.replay), args.slo, args.jobs)
        return
    tiers_file, workload_file = SCENARIOS[args.scenario]
    config, text = load_config(EXAMPLES / tiers_file)
    workload = window(load_workload(EXAMPLES / workload_file), args.from_h * 3600, args.hours * 3600)
    tier = next(iter(workload.tiers))
    hours = workload.duration / 3600
    print(f"{args.scenario} tier {tier}: {hours:g} h from hour {args.from_h:g}, {args.trials} trials, "
          f"{args.jobs} jobs, SLO {100 * args.slo:g}%")  # fmt: skip
    if args.save is not None:
        start = time.perf_counter()
        result = tune(config, text, workload, tier, trials=args.trials, slo_target=args.slo, jobs=args.jobs,
                      stop_early=False)  # fmt: skip
        wall = time.perf_counter() - start
        saved = {"wall": wall, "duration": workload.duration, "requests": result.requests,
                 "trials": [dataclasses.asdict(t) for t in result.trials]}  # fmt: skip
        args.save.write_text(json.dumps(saved))
        print(f"{len(result.trials)} trials run out in {wall:.0f} s, saved to {args.save}")
        print_replay(saved, args.slo, args.jobs)
        return
    print("| mode | wall s | stopped early | simulated h | best $ | best SLO |")
    print("|---|---|---|---|---|---|")
    for stop_early, pace in ((True, PACE), (True, None), (False, None)):
        start = time.perf_counter()
        result = tune(config, text, workload, tier, trials=args.trials, slo_target=args.slo, jobs=args.jobs,
                      stop_early=stop_early, pace=pace)  # fmt: skip
        wall = time.perf_counter() - start
        best = result.best or result.closest
        stopped = sum(1 for t in result.trials if t.stopped is not None)
        mode = "pace and bounds (default)" if pace else "exact bounds only" if stop_early else "run every trial out"
        best_text = "-" if best is None else f"{best.cost:,.2f}"
        slo_text = (
            "-"
            if best is None or best.slo is None
            else f"{100 * best.slo:.2f}%" + ("" if result.best is not None else " (misses the target)")
        )
        ran = f"{simulated_hours(result, hours):.1f} of {hours * len(result.trials):g}"
        print(f"| {mode} | {wall:.0f} | {stopped} of {len(result.trials)} | {ran} | {best_text} | {slo_text} |")
        sys.stdout.flush()


def load_saved(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def print_replay(saved: dict[str, Any], slo: float, jobs: int) -> None:
    n, hours = len(saved["trials"]), saved["duration"] / 3600
    wall_per_hour = saved["wall"] / (n * hours)
    print(f"replayed on {n} trials run out ({n * hours:g} simulated h in {saved['wall']:.0f} s), {jobs} jobs")
    print("| rule | simulated h | est. wall s | stopped: bounds / pace | wrong stops | best $ | best SLO |")
    print("|---|---|---|---|---|---|---|")
    rules = [None, PACE] + [PaceRule(w, m) for w in (0.25, 0.5) for m in (0.02, 0.05, 0.1) if PaceRule(w, m) != PACE]
    for rule in rules:
        r = replay(saved, slo, rule, jobs=jobs)
        best = "-" if r.best_cost is None else f"{r.best_cost:,.2f}"
        best_slo = "-" if r.best_slo is None else f"{100 * r.best_slo:.2f}%"
        print(f"| {r.rule}{' (default)' if rule == PACE else ''} | {r.hours:,.1f} | {r.hours * wall_per_hour:,.0f} "
              f"| {r.stopped_by_bound} / {r.stopped_by_pace} | {r.wrong_stops} | {best} | {best_slo} |")  # fmt: skip


if __name__ == "__main__":
    main()
