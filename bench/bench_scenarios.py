"""Every fleet scenario through the real controller and the baselines: one table to compare policies on.

From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_scenarios.py                      # every scenario, full length
    python bench/bench_scenarios.py --hours 6            # the first 6 simulated hours of each (to iterate)
    python bench/bench_scenarios.py --from 6 --hours 4   # hours 6-10 of each (the morning ramp of the days)
    python bench/bench_scenarios.py fleet-business-day   # some scenarios, by name

Per scenario and tier: SLO attainment (share of requests with TTFT within the target; batch: tasks started
within the wait target), cost ÷ oracle, ÷ the SkyServe-style baseline, ÷ the reactive (KEDA/HPA) baseline,
each baseline's SLO, peak ready instances and the wall time of the whole run (controller, fleet model and
baselines, which run in a second process). Targets for user-facing tiers with default policy settings:
SLO >= 99.5%, cost <= 0.85 × SkyServe-style at equal or better SLO, cost <= 1.2 × oracle. Batch: every task
started within its wait target at <= 1.8 × oracle. Trace files are read from $SCALECTL_TRACES when set,
else from the shared traces folder beside the repository.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scalectl.simulator.controller_run import simulate
from scalectl.simulator.report import BaselineOutcome, pct
from scalectl.simulator.workloads.shapes import SpikeShape
from scalectl.simulator.workloads.spec import BatchLoad, Workload, load_workload
from scalectl.tiers.config import load_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# name -> (tiers file, workload file): open-loop fleet days, the closed-loop sessions day, the batch night
SCENARIOS = {
    "fleet-business-day": ("tiers/fleet-business-day.yaml", "workloads/fleet-business-day.yaml"),
    "fleet-azure-code": ("tiers/fleet-azure-code.yaml", "workloads/fleet-azure-code.yaml"),
    "fleet-azure-conversation": ("tiers/fleet-azure-conversation.yaml", "workloads/fleet-azure-conversation.yaml"),
    "support-fleet-day": ("tiers/support-fleet-day.yaml", "workloads/support-fleet-day.yaml"),
    "batch-night": ("tiers/batch-night.yaml", "workloads/batch-night.yaml"),
    "batch-ingest-day": ("tiers/batch-ingest-day.yaml", "workloads/batch-ingest-day.yaml"),
}


@dataclass(frozen=True)
class Row:
    scenario: str
    tier: str
    hours: float
    slo: float | None
    cost: float
    oracle: float | None
    skyserve: BaselineOutcome | None
    reactive: BaselineOutcome | None
    peak: int
    wall_s: float


def window(workload: Workload, from_s: float, duration_s: float | None) -> Workload:
    """The slice [from, from + duration) of a workload, as a workload starting at ``from``: clock-based shapes
    (diurnal, daily) follow the new start by themselves; spikes and bursts move back by ``from``; a trace
    replay starts over at the slice's start (its tiles are stationary hours; the shapes still scale it)."""
    end = workload.duration if duration_s is None else min(workload.duration, from_s + duration_s)
    if from_s >= end:
        raise ValueError(f"--from {from_s / 3600:g} h is past the end of the workload ({workload.duration / 3600:g} h)")
    tiers = {}
    for name, load in workload.tiers.items():
        shapes = [
            s.model_copy(update={"at": s.at - from_s}) if isinstance(s, SpikeShape) else s
            for s in getattr(load, "shape", [])
        ]
        update: dict[str, object] = {"shape": shapes}
        if isinstance(load, BatchLoad):
            bursts = []
            for b in load.bursts:
                at = b.at - from_s
                while b.every and at < 0:
                    at += b.every
                if at >= 0:
                    bursts.append(b.model_copy(update={"at": at}))
            update["bursts"] = bursts
        tiers[name] = load.model_copy(update=update)
    return workload.model_copy(
        update={"start": _later(workload.start, from_s), "duration": end - from_s, "tiers": tiers}
    )


def _later(start: str, seconds: float) -> str:
    from datetime import datetime, timedelta

    return (datetime.fromisoformat(start) + timedelta(seconds=seconds)).isoformat()


def run(name: str, hours: float | None, from_h: float = 0.0) -> list[Row]:
    tiers_file, workload_file = SCENARIOS[name]
    config, text = load_config(EXAMPLES / tiers_file)
    workload = window(load_workload(EXAMPLES / workload_file), from_h * 3600.0, None if hours is None else hours * 3600)
    start = time.perf_counter()
    result = simulate(config, text, workload, workload_source=workload_file)
    wall = time.perf_counter() - start
    report = result.report
    for line in report.warnings:
        print(f"{name}: warning: {line}", file=sys.stderr)
    rows = []
    for tier, t in report.tiers.items():
        base = report.baselines.get(tier, {})
        rows.append(
            Row(
                name,
                tier,
                workload.duration / 3600.0,
                t.slo_attainment,
                t.cost,
                base["oracle"].cost if "oracle" in base else None,
                base.get("skyserve"),
                base.get("reactive"),
                t.peak_instances,
                wall,
            )
        )
    return rows


def _x(cost: float, ref: float | None) -> str:
    return "-" if not ref else f"{cost / ref:.2f}×"


def _base(b: BaselineOutcome | None) -> tuple[str, str]:
    return ("-", "-") if b is None else (f"{b.cost:,.0f}", pct(b.slo_attainment))


HEADER = ("scenario", "tier", "h", "SLO", "cost $", "÷oracle", "÷SkyServe", "÷reactive", "SkyServe $", "SkyServe SLO",
          "reactive $", "reactive SLO", "peak", "wall s")  # fmt: skip


def format_rows(rows: list[Row]) -> str:
    cells = [HEADER]
    for r in rows:
        sky, react = _base(r.skyserve), _base(r.reactive)
        cells.append((
            r.scenario, r.tier, f"{r.hours:g}", pct(r.slo), f"{r.cost:,.0f}", _x(r.cost, r.oracle),
            _x(r.cost, r.skyserve.cost if r.skyserve else None), _x(r.cost, r.reactive.cost if r.reactive else None),
            sky[0], sky[1], react[0], react[1], str(r.peak), f"{r.wall_s:.0f}",
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    lines = []
    for n, row in enumerate(cells):
        padded = (c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        lines.append("| " + " | ".join(padded) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", help=f"scenario names (default: all): {', '.join(SCENARIOS)}")
    parser.add_argument("--hours", type=float, default=None, help="simulate only H hours of each")
    parser.add_argument("--from", dest="from_h", type=float, default=0.0, help="start H hours into each scenario")
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    if args.hours is not None and args.hours <= 0:
        parser.error("--hours must be above 0")
    rows: list[Row] = []
    for name in args.scenarios or list(SCENARIOS):
        batch = run(name, args.hours, args.from_h)
        rows.extend(batch)
        print(f"{name}: {batch[0].hours:g} h simulated in {batch[0].wall_s:.0f} s wall", file=sys.stderr)
        print(format_rows(batch), file=sys.stderr, flush=True)  # each scenario's rows as soon as they exist
    print(format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
