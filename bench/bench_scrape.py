"""How long one tick takes to scrape and reduce N vLLM ``/metrics`` endpoints on this machine.

    python bench/bench_scrape.py [--sizes 100,500,2000] [--concurrency 64] [--ticks 3]

The stand-ins run in a second process (one uvicorn server, one socket per endpoint, each endpoint its own
engine and metric state, seeded with traffic so the bodies have realistic values and size). This process runs
the daemon's SignalReader exactly as the reconciler would: one ``read(tier, spec, endpoints)`` per tick.
Reports wall time per tick (back to back, then once after a 5.5 s pause, as a daemon's 5 s tick scrapes:
the daemon opens a connection per scrape either way), this process's CPU per tick, and the parse cost per
endpoint (fast path vs prometheus_client).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def serve(n: int) -> None:
    """Child process: N seeded stand-ins; prints their URLs, serves until stdin closes."""
    from scalectl.vllm_standin import StandinConfig, run_in_thread

    configs = [
        StandinConfig(model="meta-llama/Llama-3.1-8B-Instruct", max_model_len=4096, metrics_generation="new")
        for _ in range(n)
    ]
    running = run_in_thread(configs, start_timeout=300)
    rng = random.Random(1)
    for standin in running.standins:
        state = standin.state
        with state.lock:
            for _ in range(200):
                ttft = rng.lognormvariate(0, 0.6) * 0.08
                observed = {"ttft": ttft, "e2e": ttft + 2.0, "itl": 0.005, "queue_time": 0.01}
                observed |= {"prompt_len": 600, "generation_len": 350, "iteration_tokens": 512}
                for key, value in observed.items():
                    state.histograms[key].observe(value)
                state.successes["stop"] += 1
            state.gauges["running"] = float(rng.randint(50, 120))
            state.gauges["kv_usage"] = rng.random()
            state.bump()
        standin.renderer.render()
    print(" ".join(running.urls), flush=True)
    sys.stdin.read()
    running.stop()


def _cpu() -> float:
    return time.process_time()


async def measure(urls: list[str], concurrency: int, ticks: int) -> list[tuple[str, float, float, int]]:
    from scalectl.clocks import SystemClock
    from scalectl.sources.reader import SignalReader
    from scalectl.sources.spec import SignalsSpec

    spec = SignalsSpec.model_validate({"metrics": {"kind": "vllm", "window": "60s"}})
    reader = SignalReader(SystemClock(), timeout=5.0, concurrency=concurrency)
    rows = []
    try:
        for tick in range(ticks):
            wall, cpu = time.perf_counter(), _cpu()
            reading = await reader.read("bench", spec, urls)
            label = "first" if tick == 0 else "next"
            rows.append((label, time.perf_counter() - wall, _cpu() - cpu, len(reading.errors)))
        await asyncio.sleep(5.5)  # a daemon's tick apart (past the servers' 5 s keep-alive)
        wall, cpu = time.perf_counter(), _cpu()
        reading = await reader.read("bench", spec, urls)
        rows.append(("after 5.5 s", time.perf_counter() - wall, _cpu() - cpu, len(reading.errors)))
        assert reading.signals.ttft_p95_s is None or reading.signals.ttft_p95_s >= 0
    finally:
        await reader.aclose()
    return rows


def parse_cost(url: str) -> tuple[int, float, float]:
    import httpx

    from scalectl.sources.exposition import parse_vllm_metrics, parse_vllm_metrics_reference

    body = httpx.get(url + "/metrics").text
    n = 300
    start = time.perf_counter()
    for _ in range(n):
        parse_vllm_metrics(body, 0.0)
    fast = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for _ in range(n // 10):
        parse_vllm_metrics_reference(body, 0.0)
    reference = (time.perf_counter() - start) / (n // 10)
    return len(body), fast, reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,500,2000")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    print(f"cores: {os.cpu_count()}, concurrency: {args.concurrency}, timeout: 5s")
    print(f"{'endpoints':>9}  {'tick':<17} {'wall s':>7} {'client CPU s':>12} {'ms/endpoint':>11} {'errors':>6}")
    parse_done = False
    for n in (int(x) for x in args.sizes.split(",")):
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(n)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        )  # fmt: skip
        try:
            assert child.stdout is not None
            urls = child.stdout.readline().split()
            if len(urls) != n:
                raise SystemExit(f"the stand-in process did not start {n} endpoints")
            if not parse_done:
                size, fast, reference = parse_cost(urls[0])
                parse_done = True
            for label, wall, cpu, errors in asyncio.run(measure(urls, args.concurrency, args.ticks)):
                print(f"{n:>9}  {label:<17} {wall:>7.2f} {cpu:>12.2f} {wall / n * 1000:>11.2f} {errors:>6}", flush=True)
        finally:
            if child.stdin:
                child.stdin.close()
            child.wait(timeout=60)
    print(
        f"\nparse one /metrics body ({size / 1024:.0f} KiB): fast path {fast * 1e3:.2f} ms, "
        f"prometheus_client {reference * 1e3:.2f} ms ({reference / fast:.0f}× slower)"
    )


if __name__ == "__main__":
    main()
