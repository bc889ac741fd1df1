"""The example scenarios through the real controller: SLO, cost against the baselines, and speed.

From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_simulate.py                 # every scenario
    python bench/bench_simulate.py support-day     # one of: support-day, support-fleet, batch-night,
                                                   #   spot-storm, azure-conv

For each scenario and tier: SLO attainment, cost, cost / oracle, cost / static peak, the reactive (KEDA/HPA)
baseline's cost and SLO, and simulated seconds per wall second for the whole run (controller, fleet model
and the baselines, which run in a second process), with the CPU seconds of both processes. Targets for
user-facing tiers: SLO >= 99.5%, cost <= 1.15 x oracle and <= 0.5 x static, cheaper than reactive at equal
or better SLO. Trace files are read from
the workload's path, else from $SCALECTL_TRACES (default: the shared traces folder beside the repository).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

from scalectl.simulator.controller_run import SimulationResult, simulate
from scalectl.simulator.workloads.spec import TraceLoad, Workload, load_workload
from scalectl.tiers.config import load_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TRACES = Path(os.environ.get("SCALECTL_TRACES") or ROOT.parent / "shared" / "traces")

SCENARIOS = {  # name -> (tiers file, workload file)
    "support-day": ("tiers/support-business-day.yaml", "workloads/support-business-day.yaml"),
    "support-fleet": ("tiers/support-fleet-day.yaml", "workloads/support-fleet-day.yaml"),
    "batch-night": ("tiers/batch-night.yaml", "workloads/batch-night.yaml"),
    "spot-storm": ("tiers/spot-storm.yaml", "workloads/spot-storm.yaml"),
    "azure-conv": ("tiers/azure-conversation.yaml", "workloads/azure-conversation.yaml"),
}


def _with_traces(workload: Workload) -> Workload:
    """Read traces from $SCALECTL_TRACES when the workload's relative path does not lead to them."""
    for load in workload.tiers.values():
        if isinstance(load, TraceLoad) and not workload.trace_path(load).exists():
            candidate = TRACES / Path(load.path).name
            if candidate.exists():
                return workload.model_copy(update={"base_dir": str(TRACES.parents[1] / "a" / "b" / "c")})
    return workload


def _pct(x: float | None) -> str:
    return "   -   " if x is None else f"{100 * x:6.2f}%"


def _x(a: float, b: float | None) -> str:
    return "  -  " if not b else f"{a / b:5.2f}×"


def _children_cpu() -> float:
    """CPU seconds of finished child processes (the baselines run in one)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(name: str) -> SimulationResult:
    tiers_file, workload_file = SCENARIOS[name]
    config, text = load_config(EXAMPLES / tiers_file)
    workload = _with_traces(load_workload(EXAMPLES / workload_file))
    start, cpu_start, children_start = time.perf_counter(), time.process_time(), _children_cpu()
    result = simulate(config, text, workload, workload_source=workload_file)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start + _children_cpu() - children_start
    report = result.report
    requests = sum(t.requests for t in report.tiers.values())
    print(f"\n{name}: {workload.duration / 3600:g} h simulated in {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({workload.duration / wall:,.0f} sim-s/s, {requests:,} requests, {result.ticks:,} ticks, "
          f"{result.decisions:,} decisions)")  # fmt: skip
    print(f"  {'tier':<16} {'SLO':>7} {'cost $':>9} {'÷oracle':>7} {'÷static':>7} {'reactive $':>10} {'react SLO':>9}"
          f" {'peak':>4} {'intr':>4} {'retry':>5} {'lost':>4}")  # fmt: skip
    for tier, t in report.tiers.items():
        base = report.baselines.get(tier, {})
        oracle = base["oracle"].cost if "oracle" in base else None
        static = base["static"].cost if "static" in base else None
        reactive = base.get("reactive")
        r_cost, r_slo = (reactive.cost, reactive.slo_attainment) if reactive else (float("nan"), None)
        print(f"  {tier:<16} {_pct(t.slo_attainment)} {t.cost:9.2f} {_x(t.cost, oracle):>7} {_x(t.cost, static):>7} "
              f"{r_cost:10.2f} {_pct(r_slo)}"
              f"  {t.peak_instances:>4} {t.interruptions:>4} {t.retries:>5} {t.lost_tasks:>4}")  # fmt: skip
    total = report.total()
    print(f"  {'total':<16} {_pct(total['slo_attainment'])} {total['cost']:9.2f} "
          f"{_x(total['cost'], total.get('oracle_cost')):>7} {_x(total['cost'], total.get('static_cost')):>7} "
          f"{total.get('reactive_cost', float('nan')):10.2f}")  # fmt: skip
    return result


if __name__ == "__main__":
    for scenario in sys.argv[1:] or list(SCENARIOS):
        run(scenario)
