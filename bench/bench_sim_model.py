"""Simulator speed: simulated seconds per wall second and requests per wall second.

From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_sim_model.py            # all cases
    python bench/bench_sim_model.py day        # one case: instance | trace | day

Cases: one H100 under 100 closed-loop sessions (the calibration load); the Azure conversation trace tiled
over a day on 2 instances; the support business day (three tiers, ~2 M requests) driven by the reactive
baseline, every tier ticking every 5 s of virtual time.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from scalectl.simulator.baselines import BaselineSettings, run_reactive
from scalectl.simulator.fleet import Fleet, tier_models
from scalectl.simulator.serving_pool import ServingPool
from scalectl.simulator.workloads.sessions import ClosedLoopSessions
from scalectl.simulator.workloads.spec import load_workload, parse_workload
from scalectl.simulator.workloads.tokens import TokenDist
from scalectl.sizing.engine import EngineConfig, build_profile
from scalectl.tiers.config import load_config

ROOT = Path(__file__).resolve().parents[1]

TRACES = Path(os.environ.get("SCALECTL_TRACES") or ROOT.parent / "shared" / "traces")


def _line(name: str, sim_s: float, wall: float, requests: int) -> None:
    print(f"{name:<34} {sim_s:>9.0f} sim-s in {wall:6.2f} s wall: {sim_s / wall:>8.0f} sim-s/s, "
          f"{requests / wall:>9.0f} requests/s ({requests:,} requests)")  # fmt: skip


def bench_instance(seconds: float = 3600.0) -> None:
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b", EngineConfig(max_num_seqs=200))
    pool = ServingPool(profile)
    pool.set_instances(["h100"])
    source = ClosedLoopSessions(
        100, lambda _t: 100, 0.1, 0.5, TokenDist(600, 0.2), TokenDist(350, 0.3), np.random.default_rng(1),
        profile.overhead_median_s, profile.overhead_sigma, cached_share=0.85,
    )  # fmt: skip
    start, t = time.perf_counter(), 0.0
    while t < seconds:
        pool.advance(t, t + 5.0, source)
        pool.signals()
        t += 5.0
    _line("1 H100, 100 closed-loop sessions", seconds, time.perf_counter() - start, pool.record.arrivals)


def bench_trace_day() -> None:
    text = f"""
duration: 24h
tiers:
  chat: {{kind: trace, path: {TRACES}/azure-llm-2023-conv.csv, repeat: 0}}
"""
    workload = parse_workload(text)
    config, _ = load_config(ROOT / "examples" / "tiers.yaml")
    models = tier_models(workload, {"chat": config.tiers["orchestrator"]})
    start = time.perf_counter()
    fleet = Fleet(workload, models)
    fleet.set_instances("chat", ["a", "b"])
    t = 0.0
    while t < workload.duration:
        fleet.advance(t, t + 5.0)
        fleet.signals("chat")
        t += 5.0
    _line("Azure conv trace day, 2 instances", workload.duration, time.perf_counter() - start,
          fleet.serving["chat"].record.arrivals)  # fmt: skip


def bench_day() -> None:
    workload = load_workload(ROOT / "examples" / "workloads" / "support-business-day.yaml")
    config, _ = load_config(ROOT / "examples" / "tiers.yaml")
    models = tier_models(workload, config.tiers)
    start = time.perf_counter()
    fleet = run_reactive(workload, models, BaselineSettings())
    wall = time.perf_counter() - start
    requests = sum(p.record.arrivals for p in fleet.serving.values()) + sum(
        p.record.created for p in fleet.batch.values()
    )
    _line("support day, 3 tiers, reactive", workload.duration, wall, requests)


CASES = {"instance": bench_instance, "trace": bench_trace_day, "day": bench_day}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(CASES):
        CASES[name]()
