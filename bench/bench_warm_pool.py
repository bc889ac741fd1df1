"""Warm pools on the shape suite's generators: the same shape with and without `warm_pool: {size: N}`.

    python bench/bench_warm_pool.py [--family flash-crowd] [--sizes 0,2,4] [--seed 677330] [--hours 3]

Prints one JSON line per pool size (0: no pool): SLO attainment, cost (the pool's storage inside it),
the storage part, boots by path and peak instances. The controller only; no baselines."""

from __future__ import annotations

import argparse
import json

import yaml

from bench.shapes import generate
from scalectl.simulator.controller_run import RunOptions, simulate
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.tiers.config import parse_config


def run(family: str, size: int, seed: int, hours: float) -> dict[str, object]:
    files = generate(family, seed, "small", "h100-8b", hours)
    data = yaml.safe_load(files.tiers_yaml)
    for spec in data["tiers"].values():
        if size:
            spec["warm_pool"] = {"size": size}
    text = yaml.safe_dump(data, sort_keys=False)
    workload = parse_workload(files.workload_yaml, f"{family}.yaml")
    result = simulate(parse_config(text, "tiers.yaml"), text, workload, options=RunOptions(baselines=False))
    (tier,) = result.report.tiers.values()
    return {
        "family": family, "pool": size, "slo": tier.slo_attainment, "cost": round(tier.cost, 2),
        "pool_storage_cost": round(tier.pool_storage_cost, 3), "boots": tier.boots, "peak": tier.peak_instances,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="flash-crowd")
    parser.add_argument("--sizes", default="0,2,4")
    parser.add_argument("--seed", type=int, default=677330)
    parser.add_argument("--hours", type=float, default=3.0)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        print(json.dumps(run(args.family, size, args.seed, args.hours)), flush=True)


if __name__ == "__main__":
    main()
