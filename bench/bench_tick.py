"""Reconcile tick cost at fleet scale: N instances across 100 tiers on the simulated cloud.

Measures CPU time (process_time) per steady-state tick, the figure that bounds how large a fleet one
daemon can run at a 5 s tick. The garbage collector runs with the daemon's threshold
(``scalectl.controller.collector``); ``--python-gc`` keeps Python's default. From the repository root
(project installed, or PYTHONPATH=.):
    python bench/bench_tick.py [--python-gc] [1000 10000]
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import tempfile
import time

from scalectl.clocks import FakeClock
from scalectl.controller.collector import set_daemon_threshold
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.migrate import upgrade
from scalectl.controller.store.repository import Store
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config

TIERS = 100


def tiers_yaml(per_tier: int) -> str:
    lines = ["tiers:"]
    gpus = ["H100-SXM5-80GB", "A100-80GB-PCIe", "L40S-48GB", "H100-PCIe-80GB"]
    for i in range(TIERS):
        lines += [
            f"  t{i:03d}:",
            "    capacity: on-demand",
            f"    gpu: {gpus[i % len(gpus)]}",
            "    providers: [simulated]",
            f"    min: {per_tier}",
            f"    max: {per_tier * 2}",
            f"    policy: {{kind: min-floor, floor: {per_tier}, capacity: 100}}",
        ]
    return "\n".join(lines) + "\n"


async def run(total: int, ticks: int) -> dict[str, float]:
    per_tier = total // TIERS
    clock = FakeClock()
    cloud = SimulatedCloud(
        ProviderConfig("simulated", "simulated", options={"provision_delay_min": 60, "provision_delay_max": 60}),
        clock,
    )
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/bench.db")
        upgrade(engine)
        store = Store(engine)
        text = tiers_yaml(per_tier)
        store.config.apply(parse_config(text, "bench"), text, "bench", clock.now())
        signals = StaticSignals(clock)
        for i in range(TIERS):
            signals.set(f"t{i:03d}", queue_depth=0.0, requests_running=per_tier * 50.0)
        reconciler = Reconciler(store, {"simulated": cloud}, signals, clock)
        c0, w0 = time.process_time(), time.perf_counter()
        await reconciler.tick()  # the fleet launches: N intents, N creates
        launch_cpu, launch_wall = time.process_time() - c0, time.perf_counter() - w0
        clock.advance(61)
        await reconciler.tick()  # everything becomes ready
        cpu, wall = [], []
        for _ in range(ticks):  # steady state: observe, decide, nothing to do
            clock.advance(5)
            c0, w0 = time.process_time(), time.perf_counter()
            await reconciler.tick()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        live = len(await cloud.list("sc-"))
        engine.dispose()
    assert live == per_tier * TIERS, live
    return {
        "instances": live,
        "launch_tick_cpu_s": launch_cpu,
        "launch_tick_wall_s": launch_wall,
        "steady_tick_cpu_s_median": statistics.median(cpu),
        "steady_tick_cpu_s_max": max(cpu),
        "steady_tick_wall_s_median": statistics.median(wall),
    }


def main() -> None:
    args = sys.argv[1:]
    if "--python-gc" in args:
        args.remove("--python-gc")
    else:
        set_daemon_threshold()  # as `scalectl daemon` runs
    print(f"garbage collector thresholds: {gc.get_threshold()}")
    sizes = [int(a) for a in args] or [1000, 10000]
    print(f"{'instances':>10} {'launch tick cpu':>16} {'steady tick cpu (median)':>25} {'max':>8} {'wall':>8}")
    for total in sizes:
        r = asyncio.run(run(total, ticks=5))
        print(
            f"{r['instances']:>10} {r['launch_tick_cpu_s']:>15.3f}s {r['steady_tick_cpu_s_median']:>24.3f}s"
            f" {r['steady_tick_cpu_s_max']:>7.3f}s {r['steady_tick_wall_s_median']:>7.3f}s"
        )


if __name__ == "__main__":
    main()
