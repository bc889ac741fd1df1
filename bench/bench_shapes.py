"""One command that measures the controller's default policy on many traffic shapes against the peers.

Each shape comes from a generator in bench/shapes/ (a family, a scale, a GPU and a seed give a tiers file and
a workload file). Per shape, through the simulator:
- ours: the tier as a new user writes it (GPU and model, `min`/`max`, `{kind: min-floor, floor: 2,
  ttft_max}`; batch: `{kind: scale-to-zero, max_wait}`), every other setting the default;
- SkyServe: the built-in SkyServe-style baseline (a copy of SkyServe's request-rate autoscaler), with ours' floor as
  its `min_replicas`, at the cheapest `target_qps_per_replica` on a grid (factors of the rate one instance serves
  within the target, largest first) that holds the SLO goal (99.5%) on that day; with --skyserve-python, SkyServe
  0.14.1's own RequestRateAutoscaler through `kind: external` instead (bench/bench_skyserve_external.py's policy);
- KEDA/HPA as a user configures it (the reactive baseline), the oracle, and every other baseline the
  report has (a `clairvoyant` column is filled when the simulator reports one, "-" otherwise).

    python bench/bench_shapes.py                         # every family, small, h100-8b, 3 h, fresh seed
    python bench/bench_shapes.py --seed 7 --families flash-crowd,azure-code --scales small,large
    python bench/bench_shapes.py --scales small,medium,large --gpus h100-8b,a100-8b --full --jobs 2
    python bench/bench_shapes.py --seed 7 --json /tmp/shapes.json --write /tmp/shapes   # keep the files

The seed is printed; `--families F --scales S --gpus G --seed N` (and the same --hours) reruns any row.
Trace files are read from $SCALECTL_TRACES when set, else from the shared traces folder beside the repository.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `bench.shapes` and `bench.skyserve.policy` (the external class) import from here

from bench.bench_equal_slo import peer_runner  # noqa: E402
from bench.shapes import FAMILIES, GPUS, SCALES, ShapeError, generate  # noqa: E402
from scalectl.simulator.baselines import BaselineSettings  # noqa: E402
from scalectl.simulator.boots import Boots  # noqa: E402
from scalectl.simulator.capacity import capacity_for  # noqa: E402
from scalectl.simulator.controller_run import RunOptions, models_for, simulate  # noqa: E402
from scalectl.simulator.report import pct  # noqa: E402
from scalectl.simulator.tune import text_with_policy, with_policy  # noqa: E402
from scalectl.simulator.workloads.spec import BatchLoad, load_workload  # noqa: E402
from scalectl.tiers.config import load_config  # noqa: E402

SLO_GOAL = 0.995
GRID = (1.25, 1.0, 0.75, 0.5, 0.35, 0.25)  # × the qps one instance serves within the target
SHORT_HOURS = 3.0


@dataclass
class Row:
    family: str
    scale: str
    gpu: str
    seed: int
    hours: float
    summary: str
    peak_rate: float
    slo: float | None
    cost: float
    peak: int
    baselines: dict[str, dict[str, Any]]  # name -> {slo, cost, peak}: whatever the report holds
    skyserve: dict[str, Any] | None  # the grid's choice: {kind, factor, qps, slo, cost, held, trials}
    warnings: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def _skyserve_grid(
    config: Any, text: str, workload: Any, source: str, tier: str, default: dict[str, Any] | None,
    grid: tuple[float, ...], python: str | None,
) -> dict[str, Any]:  # fmt: skip
    """The largest qps target on the grid (cheapest) at which SkyServe holds the SLO goal, trying from the
    largest; factors above 1 only when 1 held (a lower target means more replicas, so above a miss, misses)."""
    models = {n: m for n, m in models_for(config, workload, source).items() if n == tier}
    model = models[tier]
    assert model.profile is not None
    qps = capacity_for(model.profile, model.load, workload).rate
    spec = config.tiers[tier]
    boots = Boots.of(config, [tier], workload.cloud)  # the run's boot model, as `simulate` gives its baselines
    # SkyServe keeps the floor ours keeps (its min_replicas): a user who wants two instances for failover sets
    # it on either; the report's own SkyServe-style run (at min) is then not the grid's factor-1 trial.
    low = max(spec.min, getattr(spec.policy, "floor", 0))
    if low != spec.min:
        default = None
    cfg = BaselineSettings(boots=boots.tiers(), warmup_boot_s=boots.longest_s(), slo_goal=SLO_GOAL,
                           bounds={tier: (low, spec.max)}, drain_timeout_s={tier: spec.drain_timeout})  # fmt: skip
    run = peer_runner("skyserve", workload, models, cfg)
    trials: list[dict[str, Any]] = []

    def trial(factor: float) -> dict[str, Any]:
        if python is None and factor == 1.0 and default is not None:  # the report's own SkyServe-style run
            cost, slo = default["cost"], default["slo"]
        elif python is None:
            cost, slo = run(factor)
        else:
            policy = {"kind": "external", "class": "bench.skyserve.policy:SkyServeAutoscaler",
                      "options": {"python": python, "target_qps_per_replica": qps * factor}}  # fmt: skip
            # its min_replicas is the tier's min: ours' floor, as above (the controller reads the stored text)
            peer = with_policy(config, tier, policy)
            floored = peer.tiers[tier].model_copy(update={"min": low})
            peer = peer.model_copy(update={"tiers": {**peer.tiers, tier: floored}})
            document = yaml.safe_load(text_with_policy(text, tier, policy))
            document["tiers"][tier]["min"] = low
            out = simulate(peer, yaml.safe_dump(document, sort_keys=False), workload,
                           options=RunOptions(baselines=False), workload_source=source).report.tiers[tier]  # fmt: skip
            cost, slo = out.cost, out.slo_attainment
        found = {"factor": factor, "qps": round(qps * factor, 3), "slo": slo, "cost": cost,
                 "held": slo is not None and slo >= SLO_GOAL}  # fmt: skip
        trials.append(found)
        print(f"  {tier}: SkyServe qps × {factor:g}: {pct(slo)} ${cost:,.2f}", file=sys.stderr, flush=True)
        return found

    at_one = trial(1.0)
    order = [f for f in grid if f > 1.0] if at_one["held"] else [f for f in grid if f < 1.0]
    chosen = at_one if at_one["held"] else None
    for factor in sorted(order, reverse=not at_one["held"]):  # above 1: nearest first; below: largest first
        found = trial(factor)
        if at_one["held"] and not found["held"]:
            break
        if found["held"]:
            chosen = found
            if not at_one["held"]:
                break
    if chosen is None:  # never held on the grid: the best SLO seen, marked
        chosen = max(trials, key=lambda t: t["slo"] or 0.0)
    kind = "SkyServe 0.14.1 (external)" if python else "SkyServe-style (built-in)"
    return {**chosen, "kind": kind, "trials": trials}


def run_shape(
    family: str, scale: str, gpu: str, seed: int, hours: float | None, grid: tuple[float, ...],
    python: str | None, write: str | None, parallel_baselines: bool,
) -> Row:  # fmt: skip
    files = generate(family, seed, scale, gpu, hours)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-shapes-") as tmp:
        tiers_path, workload_path = files.write(Path(write) if write else Path(tmp))
        config, text = load_config(tiers_path)
        workload = load_workload(workload_path)
        source = str(workload_path)
        result = simulate(config, text, workload, workload_source=source,
                          options=RunOptions(parallel_baselines=parallel_baselines, slo_goal=SLO_GOAL))  # fmt: skip
        report = result.report
        print(f"{files.name}: ours and the baselines in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        (tier,) = report.tiers
        ours = report.tiers[tier]
        baselines = {
            name: {"slo": b.slo_attainment, "cost": b.cost, "peak": b.peak}
            for name, b in report.baselines.get(tier, {}).items()
        }
        sky = None
        if not isinstance(workload.tiers[tier], BatchLoad):
            sky = _skyserve_grid(config, text, workload, source, tier, baselines.get("skyserve"), grid, python)
    return Row(family, files.scale, gpu, seed, workload.duration / 3600, files.summary, files.peak_rate,
               ours.slo_attainment, ours.cost, ours.peak_instances, baselines, sky, list(report.warnings),
               time.perf_counter() - started)  # fmt: skip


# ---- the table ------------------------------------------------------------------------------------------------
def _div(cost: float, ref: dict[str, Any] | None) -> str:
    return "-" if ref is None or not ref.get("cost") else f"{cost / ref['cost']:.2f}×"


def _peer(ref: dict[str, Any] | None) -> str:
    return "-" if ref is None else f"{pct(ref.get('slo'))} ${ref['cost']:,.2f}"


HEADER = ("family", "scale", "gpu", "seed", "h", "SLO", "cost $", "÷SkyServe", "÷clairvoyant", "÷oracle", "peak",
          "SkyServe (qps × f)", "KEDA/HPA", "oracle", "clairvoyant", "wall s")  # fmt: skip


def table(rows: list[Row]) -> str:
    cells = [HEADER]
    for r in rows:
        b = r.baselines
        sky = r.skyserve
        sky_cell = "-" if sky is None else f"{_peer(sky)} (×{sky['factor']:g}{'' if sky['held'] else ', never held'})"
        cells.append((
            r.family, r.scale, r.gpu, str(r.seed), f"{r.hours:g}", pct(r.slo), f"{r.cost:,.2f}", _div(r.cost, sky),
            _div(r.cost, b.get("clairvoyant")), _div(r.cost, b.get("oracle")), str(r.peak), sky_cell,
            _peer(b.get("reactive")), _peer(b.get("oracle")), _peer(b.get("clairvoyant")), f"{r.wall_s:.0f}",
        ))  # fmt: skip
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _split(text: str, known: Any, what: str, parser: argparse.ArgumentParser) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in items if s not in known and not (what == "scale" and _is_number(s))]
    if unknown or not items:
        parser.error(f"unknown {what}(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}")
    return items


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated (default: all)")
    parser.add_argument("--scales", default="small",
                        help=f"comma-separated: {', '.join(f'{k} ({v} instances)' for k, v in SCALES.items())}, or"
                        " a number of instances at peak (default: small)")  # fmt: skip
    parser.add_argument("--gpus", default="h100-8b", help=f"comma-separated: {', '.join(GPUS)} (default: h100-8b)")
    parser.add_argument("--seed", type=int, default=None, help="the shapes' seed (default: a fresh one, printed)")
    parser.add_argument("--hours", type=float, default=SHORT_HOURS,
                        help=f"virtual hours per shape, on its busy part (default {SHORT_HOURS:g})")  # fmt: skip
    parser.add_argument("--full", action="store_true", help="each family's full length (a day; the week: 4 days)")
    parser.add_argument("--jobs", type=int, default=1, help="shapes run at once, one process each (default 1)")
    parser.add_argument("--grid", default=",".join(f"{f:g}" for f in GRID),
                        help="SkyServe's qps target factors (default %(default)s)")  # fmt: skip
    parser.add_argument("--skyserve-python", default=os.environ.get("SKYPILOT_PYTHON"),
                        help="a Python with skypilot 0.14.1: run SkyServe's own autoscaler (default: $SKYPILOT_PYTHON;"
                        " unset: the built-in SkyServe-style baseline)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here ('-': stdout)")
    parser.add_argument("--write", type=Path, default=None, help="keep each shape's tiers and workload files here")
    args = parser.parse_args(argv)
    families = _split(args.families, FAMILIES, "family", parser)
    scales = _split(args.scales, SCALES, "scale", parser)
    gpus = _split(args.gpus, GPUS, "gpu", parser)
    if args.jobs < 1 or args.hours <= 0:
        parser.error("--jobs must be at least 1 and --hours above 0")
    grid = tuple(float(f) for f in args.grid.split(","))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    hours = None if args.full else args.hours
    shapes = [(f, s, g) for f in families for s in scales for g in gpus]
    try:  # every shape generates before any runs: a scale the suite cannot serve stops here, with why
        for f, s, g in shapes:
            print(f"{f} {s} {g}: {generate(f, seed, s, g, hours).summary}", file=sys.stderr)
    except ShapeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    skyserve = "SkyServe 0.14.1's own autoscaler (external)" if args.skyserve_python else "the SkyServe-style baseline"
    print(f"seed {seed} (rerun with --seed {seed}); SkyServe: {skyserve}, qps grid ×{args.grid}", file=sys.stderr)
    write = str(args.write) if args.write else None
    jobs = [(f, s, g, seed, hours, grid, args.skyserve_python, write, args.jobs > 1) for f, s, g in shapes]
    rows: list[Row] = []
    if args.jobs == 1:
        for job in jobs:
            rows.append(run_shape(*job))
            print(table(rows[-1:]), file=sys.stderr, flush=True)
    else:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_shape, *job) for job in jobs]
            for future in concurrent.futures.as_completed(futures):
                print(table([future.result()]), file=sys.stderr, flush=True)
            rows = [future.result() for future in futures]
    for r in rows:
        for line in r.warnings:
            print(f"{r.family} {r.scale} {r.gpu}: warning: {line}", file=sys.stderr)
    print(f"seed {seed}; {'full length' if hours is None else f'{hours:g} h'} per shape; SkyServe: {skyserve}, "
          f"cheapest qps factor on ×{args.grid} that holds {100 * SLO_GOAL:g}%")  # fmt: skip
    for r in rows:
        print(f"- {r.family} {r.scale} {r.gpu}: {r.summary}")
    print(table(rows))
    if args.json is not None:
        text = json.dumps({"seed": seed, "hours": hours, "skyserve": skyserve, "grid": list(grid),
                           "rows": [r.__dict__ for r in rows]}, indent=2)  # fmt: skip
        if str(args.json) == "-":
            print(text)
        else:
            args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
