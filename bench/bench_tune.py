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
import sys
import time

from bench_scenarios import EXAMPLES, SCENARIOS, window

from simulator.tune import TuneResult, tune
from simulator.workloads.spec import load_workload
from tiers.config import load_config


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
    args = parser.parse_args()
    tiers_file, workload_file = SCENARIOS[args.scenario]
    config, text = load_config(EXAMPLES / tiers_file)
    workload = window(load_workload(EXAMPLES / workload_file), args.from_h * 3600, args.hours * 3600)
    tier = next(iter(workload.tiers))
    hours = workload.duration / 3600
    print(f"{args.scenario} tier {tier}: {hours:g} h from hour {args.from_h:g}, {args.trials} trials, "
          f"{args.jobs} jobs, SLO {100 * args.slo:g}%")  # fmt: skip
    print("| mode | wall s | stopped early | simulated h | best $ | best SLO |")
    print("|---|---|---|---|---|---|")
    for stop_early in (True, False):
        start = time.perf_counter()
        result = tune(config, text, workload, tier, trials=args.trials, slo_target=args.slo, jobs=args.jobs,
                      stop_early=stop_early)  # fmt: skip
        wall = time.perf_counter() - start
        best = result.best or result.closest
        stopped = sum(1 for t in result.trials if t.stopped is not None)
        mode = "stop early (default)" if stop_early else "run every trial out"
        best_text = "-" if best is None else f"{best.cost:,.2f}"
        slo_text = (
            "-"
            if best is None or best.slo is None
            else f"{100 * best.slo:.2f}%" + ("" if result.best is not None else " (misses the target)")
        )
        ran = f"{simulated_hours(result, hours):.1f} of {hours * len(result.trials):g}"
        print(f"| {mode} | {wall:.0f} | {stopped} of {len(result.trials)} | {ran} | {best_text} | {slo_text} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
