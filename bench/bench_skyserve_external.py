"""SkyServe's own RequestRateAutoscaler (skypilot from PyPI) through ``kind: external``, next to the built-in
SkyServe-style baseline, on one of the fleet scenarios.

skypilot pins click<8.2, so it lives in its own virtualenv; the policy runs it as a subprocess:
    python3 -m venv /tmp/skypilot && /tmp/skypilot/bin/pip install 'skypilot==0.14.1'
    export SKYPILOT_PYTHON=/tmp/skypilot/bin/python
    python bench/bench_skyserve_external.py fleet-business-day --from 6 --hours 2

Both use the same target qps per replica (the rate one instance serves at TTFT p95 within the target, as
the built-in baseline does) and SkyServe's default delays. They should agree closely: the difference is
the built-in's 5 s tick (arrivals reach SkyServe's window per tick) against the same tick here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `bench.skyserve.policy` is imported by the simulator as the external class

from bench.bench_scenarios import EXAMPLES, SCENARIOS, window  # noqa: E402
from scalectl.simulator.capacity import capacity_for  # noqa: E402
from scalectl.simulator.controller_run import models_for, simulate  # noqa: E402
from scalectl.simulator.tune import with_policy  # noqa: E402
from scalectl.simulator.workloads.spec import load_workload  # noqa: E402
from scalectl.tiers.config import load_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", nargs="?", default="fleet-business-day", choices=sorted(SCENARIOS))
    parser.add_argument("--hours", type=float, default=None)
    parser.add_argument("--from", dest="from_h", type=float, default=0.0)
    parser.add_argument("--python", default=os.environ.get("SKYPILOT_PYTHON"), help="a Python with skypilot")
    args = parser.parse_args(argv)
    if not args.python:
        parser.error("set --python or $SKYPILOT_PYTHON to the interpreter of a virtualenv with skypilot")
    tiers_file, workload_file = SCENARIOS[args.scenario]
    config, text = load_config(EXAMPLES / tiers_file)
    workload = window(load_workload(EXAMPLES / workload_file), args.from_h * 3600, args.hours and args.hours * 3600)
    models = models_for(config, workload, workload_file)
    for name, model in models.items():
        if model.profile is None:
            parser.error(f"{args.scenario}: tier {name} is a batch tier; SkyServe serves HTTP replicas")
        qps = capacity_for(model.profile, model.load, workload).rate
        policy = {"kind": "external", "class": "bench.skyserve.policy:SkyServeAutoscaler",
                  "options": {"python": args.python, "target_qps_per_replica": qps}}  # fmt: skip
        config = with_policy(config, name, policy)
    start = time.perf_counter()
    report = simulate(config, text, workload, workload_source=workload_file).report
    wall = time.perf_counter() - start
    print(f"{args.scenario}: {workload.duration / 3600:g} h in {wall:.0f} s wall")
    print("| tier | SkyServe 0.14.1 SLO | $ | ÷oracle | built-in SkyServe-style SLO | $ | ÷oracle | peak |")
    print("|---|---|---|---|---|---|---|---|")
    for name, t in report.tiers.items():
        base = report.baselines[name]
        oracle, sky = base["oracle"].cost, base["skyserve"]
        print(f"| {name} | {100 * (t.slo_attainment or 0):.2f}% | {t.cost:,.2f} | {t.cost / oracle:.2f}× "
              f"| {100 * (sky.slo_attainment or 0):.2f}% | {sky.cost:,.2f} | {sky.cost / oracle:.2f}× "
              f"| {t.peak_instances} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
