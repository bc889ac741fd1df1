"""Batch tiers with only ``max_wait`` set, on workloads drawn at random: shapes and scales not in the repository.

    python bench/bench_batch_shapes.py                 # 12 drawn workloads, 12 h each
    python bench/bench_batch_shapes.py --count 30 --seed 7 --hours 24

Each workload is drawn from a seed: the task time (20 s to 10 min, as variable as cv 0.3 to 1.5), the slots
per worker (1 to 16), ``max_wait`` (5 minutes to 2 hours), a trickle that keeps from a twentieth of a
worker to two workers busy, and up to three kinds of burst (50 to 3,000 tasks, arriving over 1 to 30
minutes, some repeating). The tier is spot H100s with on-demand fallback on the simulated cloud, and only
``max_wait`` is set. Per workload it prints the share of tasks started within ``max_wait``, the cost, and
the cost ÷ the oracle (task-seconds packed perfectly, no boot) and ÷ the reactive (KEDA/HPA) baseline;
then the lowest SLO, and the median and worst cost ÷ oracle. The target for batch tiers: every task
started within ``max_wait`` at ≤ 1.8 × the oracle. The batch scenarios in the repository are in
bench/bench_scenarios.py; this one guards against tuning the method to them.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from dataclasses import dataclass

from scalectl.simulator.controller_run import simulate
from scalectl.simulator.report import pct
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.tiers.config import parse_config

TIERS = """\
tiers:
  jobs:
    capacity: spot
    fallback: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 0
    max: 96
    drain_timeout: {drain}
    policy: {{kind: scale-to-zero, max_wait: {max_wait}}}
"""


@dataclass(frozen=True)
class Drawn:
    seed: int
    task_s: float
    cv: float
    slots: int
    max_wait_s: float
    rate: float  # trickle tasks per second
    bursts: list[tuple[float, int, float, float | None]]  # (at s, tasks, over s, every s or None)

    def workload(self, hours: float) -> str:
        lines = [
            f"seed: {self.seed}",
            'start: "2026-04-06T00:00:00+00:00"',
            f"duration: {hours:g}h",
            "tiers:",
            "  jobs:",
            "    kind: batch",
            f"    rate: {self.rate:.5f}",
            f"    task_time: {{mean: {self.task_s:.0f}s, cv: {self.cv:.2f}}}",
            f"    concurrency: {self.slots}",
            f"    wait_target: {self.max_wait_s:.0f}s",
        ]
        if self.bursts:
            lines.append("    bursts:")
            for at, tasks, over, every in self.bursts:
                repeat = f", every: {every:.0f}s" if every else ""
                lines.append(f"      - {{at: {at:.0f}s, tasks: {tasks}, over: {over:.0f}s{repeat}}}")
        return "\n".join(lines) + "\n"

    def tiers(self) -> str:
        drain = max(300.0, 4 * self.task_s)  # above the longest task, as the docs ask
        return TIERS.format(drain=f"{drain:.0f}s", max_wait=f"{self.max_wait_s:.0f}s")

    def text(self) -> str:
        burst = ", ".join(
            f"{n}@{at / 3600:.1f}h/{over / 60:.0f}m" + ("↻" if every else "") for at, n, over, every in self.bursts
        )
        return (
            f"task {self.task_s:.0f}s cv {self.cv:.1f}, {self.slots} slots, max_wait {self.max_wait_s / 60:.0f}m, "
            f"trickle {self.rate * self.task_s / self.slots:.2f} workers, bursts [{burst or '-'}]"
        )


def draw(seed: int, hours: float) -> Drawn:
    rng = random.Random(seed)
    task = math.exp(rng.uniform(math.log(20), math.log(600)))
    slots = rng.choice([1, 2, 4, 6, 8, 12, 16])
    max_wait = math.exp(rng.uniform(math.log(300), math.log(7200)))
    busy = math.exp(rng.uniform(math.log(0.05), math.log(2.0)))  # workers the trickle keeps busy
    bursts = []
    for _ in range(rng.randint(0, 3)):
        at = rng.uniform(0.5, hours - 1) * 3600
        every = rng.choice([None, None, 3600.0, 7200.0, 4 * 3600.0])
        bursts.append((at, rng.randint(50, 3000), rng.uniform(60, 1800), every))
    return Drawn(seed, task, rng.uniform(0.3, 1.5), slots, max_wait, busy * slots / task, bursts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=12, help="how many workloads to draw")
    parser.add_argument("--seed", type=int, default=1, help="the first seed (then seed + 1, ...)")
    parser.add_argument("--hours", type=float, default=12.0, help="the length of each workload")
    args = parser.parse_args(argv)
    ratios, slos = [], []
    print("| seed | workload | SLO | cost $ | ÷oracle | ÷reactive | reactive SLO | peak | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in range(args.seed, args.seed + args.count):
        drawn = draw(seed, args.hours)
        config = parse_config(drawn.tiers(), "drawn tiers")
        workload = parse_workload(drawn.workload(args.hours), f"drawn workload {seed}")
        start = time.perf_counter()
        report = simulate(config, drawn.tiers(), workload).report
        tier, base = report.tiers["jobs"], report.baselines.get("jobs", {})
        oracle, reactive = base.get("oracle"), base.get("reactive")
        ratio = tier.cost / oracle.cost if oracle and oracle.cost else None
        if ratio is not None:
            ratios.append(ratio)
        slo = tier.slo_attainment
        slos.append(slo if slo is not None else 0.0)
        print(
            f"| {seed} | {drawn.text()} | {pct(slo)} | {tier.cost:,.2f} | "
            f"{'-' if ratio is None else f'{ratio:.2f}×'} | "
            f"{f'{tier.cost / reactive.cost:.2f}×' if reactive and reactive.cost else '-'} | "
            f"{pct(reactive.slo_attainment if reactive else None)} | "
            f"{tier.peak_instances} | {time.perf_counter() - start:.0f} |",
            flush=True,
        )
    if ratios:
        met = sum(1 for r in ratios if r <= 1.8)
        print(
            f"\nlowest SLO {100 * min(slos):.2f}%; cost ÷ oracle median {statistics.median(ratios):.2f}×, "
            f"worst {max(ratios):.2f}×; {met} of {len(ratios)} at ≤ 1.8×"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
