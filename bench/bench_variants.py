"""GPU variants under a shortage of the tier's own GPU: SLO, cost and variant mix through the simulator.

A business day (bench/shapes `business-day` aimed at 8 instances at its peak, the 8B on an H100, from 07:00
local: the morning ramp) runs through the real controller twice or more, on the same traffic and the same
cloud, in which no new H100 can be had for two hours from `--shortage-from` (the on-demand capacity
window `H100: 0`; instances already running keep running):

- `H100 only`: the tier as the shape writes it — the fleet cannot grow while the shortage lasts;
- `+ A100×2, L40S×2`: the same tier with `variants: [{gpu: A100, gpu_count: 2}, {gpu: L40S, gpu_count: 2}]`
  (the issue's target); placement fills the capacity the decision core asks for with the cheapest
  capacity per dollar among what can be had;
- `+ A100, L40S` (`--singles`): one-GPU variants, for the cost of the idle second GPU above (the 8B fits one);
- `H100, no shortage`: the same day with H100s to be had, for reference.

    python bench/bench_variants.py                      # seed 1, 4 h from 07:00, shortage 0.5 h - 2.5 h
    python bench/bench_variants.py --seed 3 --hours 5 --shortage-from 1.5h --singles --json /tmp/v.json

Prints one row per fleet: requests, SLO met (share of requests whose TTFT is within the target), cost $,
GPU-hours, and the instance-hours each hardware ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.shapes import generate  # noqa: E402
from scalectl.policies.durations import parse_duration  # noqa: E402
from scalectl.simulator.controller_run import RunOptions, simulate  # noqa: E402
from scalectl.simulator.report import pct  # noqa: E402
from scalectl.simulator.workloads.spec import parse_workload  # noqa: E402
from scalectl.tiers.config import parse_config  # noqa: E402

SHORT_OF = "H100-SXM5-80GB"
FLEETS: dict[str, list[dict[str, Any]]] = {
    "H100 only": [],
    "+ A100×2, L40S×2": [{"gpu": "A100-80GB-PCIe", "gpu_count": 2}, {"gpu": "L40S-48GB", "gpu_count": 2}],
}
SINGLES = {"+ A100, L40S": [{"gpu": "A100-80GB-PCIe"}, {"gpu": "L40S-48GB"}]}
SLO_GOAL = 0.995


NO_SHORTAGE = "H100, no shortage"  # the same day with H100s to be had: what the day costs when nothing is short


def _files(
    seed: int, scale: str | float, hours: float, start: float, length: float, variants: list[dict[str, Any]]
) -> tuple[str, str]:
    """The shape's tiers file (with ``variants``) and its workload with the H100 shortage (none: ``length`` 0)."""
    shape = generate("business-day", seed, scale, "h100-8b", hours=hours)
    tiers = yaml.safe_load(shape.tiers_yaml)
    workload = yaml.safe_load(shape.workload_yaml)
    for tier in tiers["tiers"].values():
        if variants:
            tier["variants"] = variants
    # no new H100 in any region while the shortage lasts; what runs keeps running
    if length > 0:
        window = {"from": f"{start:g}s", "until": f"{start + length:g}s", "on-demand": 0}
        workload.setdefault("cloud", {}).setdefault("capacity", {})[SHORT_OF] = window
    return yaml.safe_dump(tiers, sort_keys=False), yaml.safe_dump(workload, sort_keys=False)


def run(
    seed: int, scale: str | float, hours: float, start: float, length: float, fleets: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    rows = []
    for label, variants in fleets.items():
        short = 0.0 if label == NO_SHORTAGE else length
        tiers_text, workload_text = _files(seed, scale, hours, start, short, variants)
        config = parse_config(tiers_text, f"{label} tiers")
        workload = parse_workload(workload_text, f"{label} workload")
        began = time.perf_counter()
        result = simulate(config, tiers_text, workload, options=RunOptions(baselines=False))
        (outcome,) = result.report.tiers.values()
        rows.append(
            {
                "fleet": label,
                "requests": outcome.requests,
                "slo_met": outcome.slo_attainment,
                "ttft_p99_s": outcome.ttft_p99_s,
                "cost": round(outcome.cost, 2),
                "gpu_hours": round(outcome.gpu_hours, 2),
                "peak_ready": outcome.peak_instances,
                "variants": outcome.variants or {SHORT_OF: None},
                "no_capacity": result.events.get("no-capacity", 0),
                "wall_s": round(time.perf_counter() - began, 1),
            }
        )
    return rows


def _mix(variants: dict[str, float | None]) -> str:
    return ", ".join(f"{label} {hours:.1f} h" if hours is not None else label for label, hours in variants.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scale", default="8", help="bench/shapes scale: small, medium, large, or instances aimed at the peak (8)"
    )
    parser.add_argument("--hours", type=float, default=4.0, help="run length from 07:00 local (default 4)")
    parser.add_argument("--shortage-from", default="30m", help="when no new H100 can be had (after the start)")
    parser.add_argument("--shortage-for", default="2h", help="how long it lasts (default 2h)")
    parser.add_argument("--singles", action="store_true", help="also one-GPU variants (A100, L40S)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    start, length = parse_duration(args.shortage_from), parse_duration(args.shortage_for)
    fleets = {**FLEETS, **(SINGLES if args.singles else {}), NO_SHORTAGE: []}
    scale = args.scale if args.scale in ("small", "medium", "large") else float(args.scale)
    rows = run(args.seed, scale, args.hours, start, length, fleets)
    print(f"business-day {args.scale} h100-8b seed {args.seed}, {args.hours:g} h from 07:00; no new {SHORT_OF} "
          f"from {start / 3600:g} h for {length / 3600:g} h; SLO goal {pct(SLO_GOAL)}")  # fmt: skip
    print(f"{'fleet':<18} {'requests':>9} {'SLO met':>8} {'TTFT p99':>9} {'cost $':>8} {'GPU-h':>6} {'peak':>5}  "
          "instance-hours by variant")  # fmt: skip
    for r in rows:
        p99 = f"{r['ttft_p99_s'] * 1000:.0f} ms" if r["ttft_p99_s"] is not None else "-"
        print(f"{r['fleet']:<18} {r['requests']:>9,} {pct(r['slo_met']):>8} {p99:>9} {r['cost']:>8.2f} "
              f"{r['gpu_hours']:>6.1f} {r['peak_ready']:>5}  {_mix(r['variants'])}")  # fmt: skip
    base = rows[0]["cost"]
    for r in rows[1:-1]:
        print(f"{r['fleet']}: cost ×{r['cost'] / base:.2f} the H100-only fleet's "
              f"(${r['cost'] - base:+.2f}), SLO {pct(r['slo_met'])} vs {pct(rows[0]['slo_met'])}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
