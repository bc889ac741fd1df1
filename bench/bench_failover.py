"""Failover time and duplicate creates with several daemons (processes) on one PostgreSQL database.

The daemons share one cloud: a local server speaking Spheron's API (the in-process simulated cloud lives
inside one daemon, so it cannot be shared between processes). Each round SIGKILLs the leader, measures the
time until a standby holds a new term, restarts the killed daemon as a standby, and counts keys the cloud
was asked to create more than once. Prints failover p50 / p99 / max and the duplicate count.

From the repository root, with PostgreSQL on 127.0.0.1:5432 (database ``test``, trust auth):
    python bench/bench_failover.py [--rounds 10] [--daemons 2] [--ttl 10]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from sqlalchemy import create_engine, text

from scalectl.clocks import SystemClock
from tests.e2e.helpers import scalectl, start_daemon
from tests.fakes.spheron_server import API_KEY, SSH_KEY_ID, TEAM_ID, booting_spheron
from tests.services import scratch_database

TIERS = """
tiers:
  web:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [spheron]
    min: 3
    max: 3
    policy: {{kind: min-floor, floor: 3}}
providers:
  spheron:
    type: spheron
    base_url: {url}
    options: {{ssh_key_id: {ssh}, team_id: {team}}}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--daemons", type=int, default=2)
    parser.add_argument("--ttl", type=float, default=10.0)
    args = parser.parse_args()

    stack = contextlib.ExitStack()
    db_url = stack.enter_context(scratch_database("scbench"))
    engine = create_engine(db_url)
    fake, server = stack.enter_context(booting_spheron(SystemClock(), minimum_runtime_minutes=0))
    env = {
        "SCALECTL_DATABASE_URL": db_url,
        "SCALECTL_SPHERON_API_KEY": API_KEY,
        "SCALECTL_TICK_INTERVAL": "1",
        "SCALECTL_LEADER_LEASE_TTL": str(args.ttl),
    }
    tmp = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    procs = {}
    try:
        config = tmp / "tiers.yaml"
        config.write_text(TIERS.format(url=server.url, ssh=SSH_KEY_ID, team=TEAM_ID))
        applied = scalectl(tmp / "cli", "apply", "-f", str(config), **env)
        assert applied.returncode == 0, applied.stderr
        for i in range(args.daemons):
            procs[f"d{i}"] = start_daemon(tmp / f"d{i}", "--port", "0", **env)

        def leader() -> tuple[int, int] | None:
            with engine.connect() as conn:
                row = conn.execute(
                    text(
                        "SELECT pid, epoch FROM leader_leases WHERE name = 'global' "
                        "AND expires_at > extract(epoch FROM clock_timestamp())"
                    )
                ).first()
            return (int(row.pid), int(row.epoch)) if row is not None else None

        def wait(check, seconds: float) -> float:  # type: ignore[no-untyped-def]
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                if check():
                    return time.monotonic() - start
                time.sleep(0.05)
            raise SystemExit(f"timed out after {seconds:.0f}s")

        wait(lambda: leader() is not None and len(fake.live()) == 3, 120)
        times: list[float] = []
        for round_no in range(args.rounds):
            time.sleep(2.0)  # the new leader settles (a few ticks)
            current = leader()
            assert current is not None
            victim = next(n for n, p in procs.items() if p.pid == current[0])
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait(timeout=10)
            took = wait(lambda old=current: (f := leader()) is not None and f[1] > old[1], 120)
            times.append(took)
            procs[f"{victim}r{round_no}"] = start_daemon(tmp / f"{victim}r{round_no}", "--port", "0", **env)
            del procs[victim]
            print(f"round {round_no + 1}: failover {took:.2f}s", flush=True)
        wait(lambda: len(fake.live()) == 3, 60)
        with fake.lock:
            created = Counter(str(b.get("name")) for b in fake.create_bodies)
        duplicates = sum(n - 1 for n in created.values() if n > 1)
        times.sort()
        p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
        print(
            f"{args.rounds} failovers, {args.daemons} daemons, lease TTL {args.ttl:g}s: "
            f"p50 {statistics.median(times):.2f}s  p99 {p99:.2f}s  max {max(times):.2f}s  "
            f"duplicate creates {duplicates}  instances created {sum(created.values())}  live {len(fake.live())}"
        )
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(timeout=30)
        engine.dispose()
        stack.close()


if __name__ == "__main__":
    main()
