"""Warm pools on the shape suite's generators: the same shape with and without `warm_pool: {size: N | auto}`,
beside SkyServe's autoscaler at its cheapest qps target that holds the SLO goal (bench_shapes.py's grid).

    python bench/bench_warm_pool.py [--families flash-crowd,periodic-bursts] [--sizes 0,2,auto]
                                    [--seed 90417] [--hours 3] [--no-skyserve]

Prints one JSON line per (family, pool size) (0: no pool): SLO attainment, cost (the pool's storage inside
it), the storage part, boots by path, peak instances and the tier's modelled resume p50; then a table with
each cost ÷ SkyServe's, against the issue's target (SLO ≥ 99.5% at ≤ 0.6× SkyServe's cost)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_shapes import GRID, SLO_GOAL, _skyserve_grid  # noqa: E402
from bench.shapes import generate  # noqa: E402
from scalectl.simulator.controller_run import RunOptions, simulate  # noqa: E402
from scalectl.simulator.workloads.spec import parse_workload  # noqa: E402
from scalectl.tiers.config import parse_config  # noqa: E402

TARGET_RATIO = 0.6


def _with_pool(tiers_yaml: str, size: str) -> str:
    data = yaml.safe_load(tiers_yaml)
    for spec in data["tiers"].values():
        if size != "0":
            spec["warm_pool"] = {"size": size if size == "auto" else int(size)}
    return yaml.safe_dump(data, sort_keys=False)


def run(family: str, size: str, seed: int, hours: float, scale: str = "small") -> dict[str, Any]:
    files = generate(family, seed, scale, "h100-8b", hours)
    text = _with_pool(files.tiers_yaml, size)
    workload = parse_workload(files.workload_yaml, f"{family}.yaml")
    result = simulate(parse_config(text, "tiers.yaml"), text, workload, options=RunOptions(baselines=False))
    ((name, tier),) = result.report.tiers.items()
    boot = result.report.boots.get(name, {})
    return {
        "family": family, "pool": size, "slo": tier.slo_attainment, "cost": round(tier.cost, 2),
        "pool_storage_cost": round(tier.pool_storage_cost, 3), "boots": tier.boots, "peak": tier.peak_instances,
        "resume_p50_s": round(boot["resume_p50_s"]) if "resume_p50_s" in boot else None,
    }  # fmt: skip


def skyserve(family: str, seed: int, hours: float, scale: str = "small") -> dict[str, Any]:
    """SkyServe-style at the cheapest grid factor that holds the goal, with ours' floor as its min."""
    files = generate(family, seed, scale, "h100-8b", hours)
    config = parse_config(files.tiers_yaml, "tiers.yaml")
    workload = parse_workload(files.workload_yaml, f"{family}.yaml")
    (tier,) = config.tiers
    found = _skyserve_grid(config, files.tiers_yaml, workload, f"{family}.yaml", tier, None, GRID, None)
    return {"family": family, "skyserve": {k: found[k] for k in ("factor", "slo", "cost", "held")}}


def table(rows: list[dict[str, Any]], sky: dict[str, dict[str, Any]]) -> str:
    out = [
        "| shape | pool | SLO | cost $ | ÷SkyServe | target met | of which storage $ "
        "| boots warm / cold / resume_failed | peak | SkyServe (qps × f) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = sky.get(r["family"])
        ratio = r["cost"] / ref["cost"] if ref and ref["cost"] else None
        held = r["slo"] is not None and r["slo"] >= SLO_GOAL
        met = "-" if ratio is None else ("yes" if held and ratio <= TARGET_RATIO else "no")
        boots = r["boots"] or {}
        peer = "-" if ref is None else f"{ref['slo']:.2%} ${ref['cost']:.2f} (×{ref['factor']:g})"
        out.append(
            f"| {r['family']} | {'none' if r['pool'] == '0' else 'size ' + r['pool']} | {r['slo']:.2%} "
            f"| {r['cost']:.2f} | {'-' if ratio is None else f'{ratio:.2f}×'} | {met} | {r['pool_storage_cost']} "
            f"| {boots.get('warm', 0)} / {boots.get('cold', 0)} / {boots.get('resume_failed', 0)} | {r['peak']} "
            f"| {peer} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default="flash-crowd,periodic-bursts")
    parser.add_argument("--sizes", default="0,2,auto")
    parser.add_argument("--seed", type=int, default=90417)
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--scale", default="small", help="the shape suite's scale (small, medium, large or a count)")
    parser.add_argument("--no-skyserve", action="store_true", help="ours only (no SkyServe grid)")
    args = parser.parse_args()
    rows, sky = [], {}
    for family in args.families.split(","):
        for size in args.sizes.split(","):
            rows.append(run(family, size, args.seed, args.hours, args.scale))
            print(json.dumps(rows[-1]), flush=True)
        if not args.no_skyserve:
            found = skyserve(family, args.seed, args.hours, args.scale)
            sky[family] = found["skyserve"]
            print(json.dumps(found), flush=True)
    print(
        f"\nseed {args.seed}; {args.hours:g} h; {args.scale}, h100-8b; "
        f"target: SLO ≥ {SLO_GOAL:.1%} at ≤ {TARGET_RATIO}× SkyServe"
    )
    print(table(rows, sky))


if __name__ == "__main__":
    main()
