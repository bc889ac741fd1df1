"""What a fleet of instances at their admission limit serves in the fleet model, against one instance alone.

A fleet that falls behind (an unannounced step, a baseline that reacts late) runs every instance at
``max_num_seqs`` with requests waiting. Each instance should then serve what one instance alone serves at
its limit. This benchmark drives N instances with open-loop traffic at 1.7× what they serve below the
limit and prints the requests served per instance per second in the last minutes, with the model's
least-connections routing and with plain alternation (round robin).

From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_saturation.py                # N = 1, 2, 5, 23
    python bench/bench_saturation.py --instances 1 2

Llama 3.1 8B on an A100 80GB PCIe (drawn day 8-2's tier), prompts 413 and outputs 134 tokens on average
(lognormal, as drawn).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np

import scalectl.simulator.serving_pool as serving_pool
from scalectl.simulator.fleet import engine_for
from scalectl.simulator.requests import Requests
from scalectl.simulator.serving_pool import ServingPool
from scalectl.simulator.workloads.sources import fresh_requests
from scalectl.tiers.config import parse_config

TIER = """
tiers:
  api:
    capacity: on-demand
    gpu: A100-80GB-PCIe
    providers: [simulated]
    min: 1
    max: 64
    policy: {kind: min-floor, ttft_max: 600ms}
"""
RATE_PER_INSTANCE = 19.3  # requests/s: 1.64 × 11.7, day 8-2's step on instances that served 11.7 below it
TICK_S, WARM_S, RUN_S = 5.0, 60.0, 300.0


class Poisson:
    def __init__(self, rate: float, seed: int) -> None:
        self.rate, self.rng = rate, np.random.default_rng(seed)

    def arrivals(self, t0: float, t1: float) -> Requests:
        n = int(self.rng.poisson(self.rate * (t1 - t0)))
        t = np.sort(self.rng.uniform(t0, t1, n))
        n_in = np.clip(self.rng.lognormal(np.log(413) - 0.35, 0.84, n), 1, 1652)
        n_out = np.clip(self.rng.lognormal(np.log(134) - 0.21, 0.65, n), 1, None)
        return fresh_requests(t, n_in, n_out)


def served_per_instance(n: int, route: Callable[[np.ndarray, int], np.ndarray] | None) -> tuple[float, int]:
    """Requests given a first token per instance per second after the warm-up, and the backlog at the end."""
    config = parse_config(TIER, "bench")
    pool = ServingPool(engine_for(config.tiers["api"]))
    pool.set_instances([f"i{k}" for k in range(n)])
    source = Poisson(RATE_PER_INSTANCE * n, seed=n)
    original = serving_pool.least_connections
    if route is not None:
        serving_pool.least_connections = route
    try:
        t, counted = 0.0, 0
        while t < WARM_S + RUN_S:
            before = sum(len(chunk) for chunk in pool.record.ttft)
            pool.advance(t, t + TICK_S, source)
            t += TICK_S
            if t > WARM_S:
                counted += sum(len(chunk) for chunk in pool.record.ttft) - before
    finally:
        serving_pool.least_connections = original
    waiting = pool.signals().requests_waiting or 0.0
    return counted / RUN_S / n, int(waiting)


def _alternate(loads: np.ndarray, n: int) -> np.ndarray:
    return np.arange(n) % loads.shape[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2, 5, 23])
    args = parser.parse_args(argv)
    print(f"open-loop traffic at {RATE_PER_INSTANCE} req/s per instance; served = first tokens per instance per s")
    print("| instances | least-connections: served, waiting at the end | round robin: served, waiting at the end |")
    print("|---|---|---|")
    for n in args.instances:
        lc, lc_wait = served_per_instance(n, None)
        rr, rr_wait = served_per_instance(n, _alternate)
        print(f"| {n} | {lc:.1f} req/s, {lc_wait:,} | {rr:.1f} req/s, {rr_wait:,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
