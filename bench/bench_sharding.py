"""Tick time per daemon with tiers sharded between 1, 2 and 4 daemons, and the time to rebalance after one
is killed: 200 tiers x 100 instances (20,000) on one shared simulated cloud (its HTTP server, so daemons in
separate processes share it), on one PostgreSQL database.

Phases, on one fleet: one daemon brings every tier up to its floor (convergence time printed), then runs
alone; a second and then two more daemons join (their share moves to them); in each phase the mean tick
time of every daemon is read from its /metrics (scalectl_tick_duration_seconds, sum and count over the
phase). Then one of the four is killed (SIGKILL) and the time until the three survivors hold every tier
is printed. All daemons and the cloud run on this machine, so they share its cores.

From the repository root, with PostgreSQL on 127.0.0.1:5432 (database ``test``, trust auth):
    python bench/bench_sharding.py [--tiers 200] [--per-tier 100] [--measure 30] [--ttl 10]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalectl.controller.store.instances import LIVE_STATES
from tests.e2e.helpers import free_port, scalectl, start_daemon
from tests.services import repo_root, scratch_database


def tiers_yaml(url: str, tiers: int, per_tier: int) -> str:
    blocks = "".join(
        f"""
  t{i:03d}:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [sim]
    min: {per_tier}
    max: {per_tier}
    policy: {{kind: min-floor, floor: {per_tier}}}"""
        for i in range(tiers)
    )
    return f"tiers:{blocks}\nproviders:\n  sim:\n    type: simulated-remote\n    base_url: {url}\n"


def start_cloud(capacity: int) -> tuple[subprocess.Popen[str], str]:
    argv = [
        sys.executable,
        "-m",
        "scalectl.providers.simulated.server",
        "--port",
        "0",
        "--capacity-per-offer",
        str(capacity),
    ]
    argv += ["--provision-delay-min", "5", "--provision-delay-max", "20"]
    proc = subprocess.Popen(argv, cwd=repo_root(), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"the simulated cloud did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def tick_totals(port: int) -> tuple[float, float]:
    """(sum, count) of this daemon's tick durations so far."""
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    total = count = 0.0
    for family in text_string_to_metric_families(body):
        if family.name == "scalectl_tick_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    total = sample.value
                elif sample.name.endswith("_count"):
                    count = sample.value
    return total, count


def wait(what: str, check: Callable[[], bool], seconds: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if check():
            return time.monotonic() - start
        time.sleep(0.2)
    raise SystemExit(f"timed out after {seconds:.0f}s waiting for {what}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiers", type=int, default=200)
    parser.add_argument("--per-tier", type=int, default=100)
    parser.add_argument("--measure", type=float, default=30.0, help="seconds of steady ticks per phase")
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--tick", type=float, default=2.0, help="SCALECTL_TICK_INTERVAL")
    args = parser.parse_args()
    total = args.tiers * args.per_tier

    stack = contextlib.ExitStack()
    db_url = stack.enter_context(scratch_database("scbench"))
    engine = create_engine(db_url)
    cloud, url = start_cloud(capacity=total)
    env = {
        "SCALECTL_DATABASE_URL": db_url,
        "SCALECTL_TICK_INTERVAL": str(args.tick),
        "SCALECTL_LEADER_LEASE_TTL": str(args.ttl),
        "SCALECTL_SHARD_TIERS": "true",
        "SCALECTL_LOG_LEVEL": "warning",
    }
    tmp = Path(tempfile.mkdtemp(prefix="bench-sharding-"))
    daemons: dict[str, tuple[subprocess.Popen[str], int]] = {}

    def start(label: str) -> None:
        port = free_port()
        daemons[label] = (start_daemon(tmp / label, "--port", str(port), **env), port)

    def holders() -> dict[str, int]:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT name, pid FROM leader_leases WHERE name LIKE 'tier:%' "
                    "AND expires_at > extract(epoch FROM clock_timestamp())"
                )
            ).all()
        return {r.name: int(r.pid) for r in rows}

    def settled(pids: set[int]) -> bool:
        held = holders()
        return len(held) == args.tiers and set(held.values()) == pids

    def ready() -> int:
        with engine.connect() as conn:
            return int(conn.scalar(text("SELECT count(*) FROM instances WHERE state = 'ready'")) or 0)

    def measure(phase: str) -> None:
        time.sleep(2 * args.tick)  # the first ticks after a move load the tiers' state
        before = {label: tick_totals(port) for label, (_, port) in daemons.items()}
        time.sleep(args.measure)
        after = {label: tick_totals(port) for label, (_, port) in daemons.items()}
        counts: dict[int, int] = {}
        for pid in holders().values():
            counts[pid] = counts.get(pid, 0) + 1
        parts = []
        for label, (proc, _) in daemons.items():
            spent, ticks = after[label][0] - before[label][0], after[label][1] - before[label][1]
            mean = f"{spent / ticks:.2f}s" if ticks else "no tick"
            parts.append(f"{label}: {counts.get(proc.pid, 0)} tiers, tick {mean} ({ticks:.0f} ticks)")
        print(f"{phase}: " + "; ".join(parts), flush=True)

    try:
        config = tmp / "tiers.yaml"
        config.write_text(tiers_yaml(url, args.tiers, args.per_tier))
        applied = scalectl(tmp / "cli", "apply", "-f", str(config), **env)
        if applied.returncode != 0:
            raise SystemExit(applied.stderr)
        start("d1")
        took = wait(f"{total} instances ready", lambda: ready() == total, 1800)
        print(f"{args.tiers} tiers x {args.per_tier} = {total} instances ready after {took:.0f}s (one daemon)")
        measure("1 daemon ")
        start("d2")
        took = wait("two daemons share the tiers", lambda: settled({p.pid for p, _ in daemons.values()}), 120)
        print(f"a second daemon joined: its share moved in {took:.1f}s", flush=True)
        measure("2 daemons")
        start("d3")
        start("d4")
        took = wait("four daemons share the tiers", lambda: settled({p.pid for p, _ in daemons.values()}), 120)
        print(f"two more joined: their shares moved in {took:.1f}s", flush=True)
        measure("4 daemons")
        counts: dict[int, int] = {}
        for pid in holders().values():
            counts[pid] = counts.get(pid, 0) + 1
        victim = next(label for label, (p, _) in daemons.items() if p.pid == max(counts, key=lambda k: counts[k]))
        proc, _ = daemons.pop(victim)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        moved = counts[proc.pid]
        took = wait("the survivors hold every tier", lambda: settled({p.pid for p, _ in daemons.values()}), 120)
        print(f"killed {victim} ({moved} tiers): the 3 survivors held every tier after {took:.1f}s", flush=True)
        with engine.connect() as conn:
            query = text("SELECT count(*) FROM instances WHERE state = ANY(:live)")
            live = conn.scalar(query, {"live": list(LIVE_STATES)})
        print(f"instances live in the store at the end: {live} (want {total})")
    finally:
        for proc, _ in daemons.values():
            proc.terminate()
        for proc, _ in daemons.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
        cloud.terminate()
        cloud.wait(timeout=30)
        engine.dispose()
        stack.close()


if __name__ == "__main__":
    main()
