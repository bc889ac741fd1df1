"""Decisions per second for each policy kind, and backtest throughput over a synthetic day at 10 s ticks.

Run from the repository root: ``PYTHONPATH=. python bench/policy_engine.py``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from scalectl.controller.backtest import run_backtest
from scalectl.policies.engine import decide
from scalectl.policies.types import Bounds, PolicyInput, PolicyState, Signals
from scalectl.tiers.config import load_config

REPO = Path(__file__).resolve().parents[1]
T0 = 1_773_057_600.0


def per_policy(n: int = 20_000) -> None:
    config, _ = load_config(REPO / "examples" / "tiers.yaml")
    for name, tier in config.tiers.items():
        state, current = PolicyState(), tier.min
        bounds = Bounds(tier.min, tier.max)
        started = time.perf_counter()
        for i in range(n):
            depth = 40 + 40 * math.sin(i / 300)
            inp = PolicyInput(T0 + i * 10, Signals(queue_depth=depth, in_flight=5, ttft_p95_s=0.2), current, state)
            decision = decide(tier.policy, inp, bounds)
            state, current = decision.state, decision.desired
        elapsed = time.perf_counter() - started
        print(f"{name:16s} {tier.policy.kind:14s} {n / elapsed:10.0f} decisions/s")


def backtest_day() -> None:
    config, _ = load_config(REPO / "examples" / "tiers.yaml")
    lines = [
        json.dumps({"t": T0 + i * 10, "tier": tier, "queue_depth": (i % 360) / 6, "in_flight": 1, "ttft_p95_s": 0.2})
        for i in range(8640)
        for tier in config.tiers
    ]
    started = time.perf_counter()
    rows = run_backtest(config, lines, "synthetic")
    elapsed = time.perf_counter() - started
    print(f"backtest: {len(rows)} lines in {elapsed:.2f}s ({len(rows) / elapsed:.0f} lines/s)")


if __name__ == "__main__":
    per_policy()
    backtest_day()
