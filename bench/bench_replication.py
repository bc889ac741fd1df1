"""The same traffic, native or replicated: does a thin trace ×10 cost what one stream of that rate costs?

From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_replication.py                       # 07:00-10:00 of a business day, ours, 4 seeds
    python bench/bench_replication.py --hours 6 --baselines # and the baselines (a second process)
    python bench/bench_replication.py --replication clumped --warmup cold   # the form before both fixes

Two workloads on the fleet business day's tiers (Llama 3.1 8B FP8, H100, 500 ms TTFT), the same daily
shape, the same token mix:
* native: one Poisson stream at ``--rate`` requests per second at the peak;
* ×N: a recorded hour of a Poisson stream at rate ÷ N (written as an Azure CSV), tiled and replicated ×N.
Independent users superpose, so the two should cost the same; the target is within 5% for our controller.
Prints each run's SLO attainment, cost and peak instances, and the ×N cost over the native one per seed
and over all seeds (at ~6 instances one instance is ~15% of the bill, so one seed alone is noisy).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from scalectl.simulator.controller_run import RunOptions, simulate
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.simulator.workloads.tokens import TokenDist
from scalectl.tiers.config import load_config

ROOT = Path(__file__).resolve().parents[1]
TIERS = ROOT / "examples" / "tiers" / "fleet-business-day.yaml"
INPUT = {"mean": 1500, "cv": 0.6, "max": 4000}
OUTPUT = {"mean": 250, "cv": 0.6}
SHAPE = [
    {
        "kind": "daily",
        "timezone": "America/New_York",
        "points": [["06:00", 0.08], ["08:00", 1.0], ["17:00", 1.0], ["18:00", 0.5], ["22:00", 0.08]],
    }
]


def write_trace(path: Path, rate: float, seed: int) -> int:
    """An hour of Poisson arrivals at ``rate`` with the native tier's token mix, as an Azure trace CSV."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, 3600.0, rng.poisson(rate * 3600.0)))
    n_in = TokenDist(INPUT["mean"], INPUT["cv"], 1, INPUT["max"]).sample(rng, t.shape[0])
    n_out = TokenDist(OUTPUT["mean"], OUTPUT["cv"], 1, None).sample(rng, t.shape[0])
    origin = datetime(2023, 11, 16, tzinfo=UTC)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for when, a, b in zip(t.tolist(), n_in.tolist(), n_out.tolist(), strict=True):
            stamp = (origin + timedelta(seconds=when)).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"
            fh.write(f"{stamp},{int(a)},{int(b)}\n")
    return int(t.shape[0])


def workload(tier: dict[str, Any], start: str, hours: float, warmup: str, seed: int, base: Path) -> Any:
    data = {"seed": seed, "start": start, "duration": hours * 3600.0, "warmup": warmup, "tiers": {"api": tier}}
    return parse_workload(yaml.safe_dump(data), "bench_replication", base)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=150.0, help="requests per second at the peak (150)")
    parser.add_argument("--copies", type=float, default=10.0, help="the replication factor N (10)")
    parser.add_argument("--start", default="2026-03-16T07:00:00-04:00", help="virtual start (a Monday, 07:00 NY)")
    parser.add_argument("--hours", type=float, default=3.0, help="virtual hours to run (3)")
    parser.add_argument("--replication", choices=("independent", "clumped"), default="independent")
    parser.add_argument("--warmup", choices=("steady", "cold"), default="steady")
    parser.add_argument("--baselines", action="store_true", help="also run the baselines (slower)")
    parser.add_argument("--seeds", default="21,22,23,24", help="workload seeds, comma-separated: one pair each")
    args = parser.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]

    config, text = load_config(TIERS)
    common = {"ttft_target": 0.5, "shape": SHAPE}
    native = {"kind": "poisson", "rate": args.rate, "input_tokens": INPUT, "output_tokens": OUTPUT, **common}
    print(f"{args.hours:g} h from {args.start}, warmup {args.warmup}, replication {args.replication}")
    totals = [0.0, 0.0]
    for seed in seeds:
        with tempfile.TemporaryDirectory() as folder:
            base = Path(folder)
            write_trace(base / "thin.csv", args.rate / args.copies, seed)
            thin = {"kind": "trace", "path": "thin.csv", "format": "azure", "repeat": 0, "rate_scale": args.copies,
                    "replication": args.replication, **common}  # fmt: skip
            costs = []
            for label, tier in (("native", native), (f"x{args.copies:g}", thin)):
                w = workload(tier, args.start, args.hours, args.warmup, seed, base)
                began = time.perf_counter()
                result = simulate(config, text, w, options=RunOptions(baselines=args.baselines))
                out = result.report.tiers["api"]
                costs.append(out.cost)
                slo = f"{out.slo_attainment:.2%}" if out.slo_attainment is not None else "-"
                line = f"seed {seed} {label:>6}: {out.requests:>9,} requests  ours {slo} ${out.cost:,.2f}"
                line += f" peak {out.peak_instances}"
                for name, b in sorted(result.report.baselines.get("api", {}).items()):
                    bslo = f"{b.slo_attainment:.2%}" if b.slo_attainment is not None else "-"
                    line += f" | {name} {bslo} ${b.cost:,.2f}"
                print(f"{line}  ({time.perf_counter() - began:.0f} s wall)", flush=True)
            print(f"seed {seed} x{args.copies:g} / native cost: {costs[1] / costs[0]:.3f}", flush=True)
            totals = [totals[0] + costs[0], totals[1] + costs[1]]
    print(f"all seeds: native ${totals[0]:,.2f}, x{args.copies:g} ${totals[1]:,.2f}, ratio {totals[1] / totals[0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
