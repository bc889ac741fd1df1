"""The daemon as a process under dependency faults; prints per fault: the healthy tier's delay, the
longest systemd watchdog gap, /healthz latency (p50/max) and when /readyz flipped.

    python bench/bench_faults_health.py            # tick 1 s, provider call deadline 2 s, WatchdogSec 6 s
    python bench/bench_faults_health.py --only hang --repeat 5

Faults: one provider account hangs every request (the other account's tier scales 1 -> 3 meanwhile,
compared with the same scale-out without the hang); PostgreSQL stopped 20 s; PostgreSQL partitioned 20 s
(a loopback proxy that holds every byte). Uses the e2e helpers (fake Spheron accounts, a private
PostgreSQL, a notify socket)."""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scalectl.controller.store.db import make_engine
from scalectl.controller.store.repository import Store
from scalectl.tiers.config import parse_config
from tests.e2e.faults import HoldingProxy, NotifySocket, get_json
from tests.e2e.helpers import wait_for
from tests.e2e.test_fault_health import DEADLINE, WATCHDOG_S, DaemonUnderTest, fleet_yaml, two_accounts
from tests.e2e.test_high_availability import PrivatePostgres

FAULT_S = 20.0


class Prober:
    """Polls /healthz and /readyz every 0.25 s in a thread: latencies, and when readiness first flipped."""

    def __init__(self, daemon: DaemonUnderTest) -> None:
        self.daemon = daemon
        self.latencies: list[float] = []
        self.unanswered = 0
        self.not_ready_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            status, _, seconds = get_json(self.daemon.url("/healthz"), 30)
            if status == 200:
                self.latencies.append(seconds)
            else:
                self.unanswered += 1
            ready, _, _ = get_json(self.daemon.url("/readyz"), 30)
            if ready != 200 and self.not_ready_at is None:
                self.not_ready_at = time.monotonic()
            self._stop.wait(0.25)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def summary(self, start: float) -> str:
        lat = sorted(self.latencies) or [float("nan")]
        flip = f"{self.not_ready_at - start:.1f}s" if self.not_ready_at is not None else "never"
        return (
            f"/healthz p50 {statistics.median(lat) * 1000:.0f} ms max {lat[-1] * 1000:.0f} ms "
            f"({self.unanswered} unanswered in 30 s); /readyz not ready after {flip}"
        )


def store_config(daemon: DaemonUnderTest, slow: int, healthy: int) -> None:
    """What ``scalectl apply`` stores, stored from this process: the command's own start-up (a second or
    more on a loaded machine) is not the daemon's to answer for."""
    text = fleet_yaml(daemon.a.server.url, daemon.b.server.url, slow, healthy)
    engine = make_engine(f"sqlite:///{daemon.tmp / 'data' / 'scalectl.db'}")
    try:
        Store(engine).config.apply(parse_config(text, "fleet.yaml"), text, "fleet.yaml", time.time())
    finally:
        engine.dispose()


def scale_out_seconds(daemon: DaemonUnderTest, hang: bool) -> float:
    """From the scale-out's configuration stored to the healthy account holding 3 deployments."""
    a, b = daemon.a, daemon.b
    daemon.apply(slow=1, healthy=1)
    wait_for("back to one each", lambda: b.live() == 1 and (hang or a.live() == 1), seconds=120)
    started = time.monotonic()
    store_config(daemon, slow=1, healthy=3)
    wait_for("healthy at 3", lambda: b.live() == 3, seconds=300)
    return time.monotonic() - started


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.1f}s (" + ", ".join(f"{v:.1f}" for v in values) + ")"


def bench_hung_provider(tmp: Path, repeat: int) -> None:
    notify = NotifySocket()
    with two_accounts() as (a, b):
        daemon = DaemonUnderTest(tmp, a, b)
        try:
            daemon.apply(slow=1, healthy=1)
            daemon.start(NOTIFY_SOCKET=str(notify.path), WATCHDOG_USEC=str(int(WATCHDOG_S * 1e6)))
            wait_for("one each", lambda: a.live() == 1 and b.live() == 1, seconds=120)
            normal = [scale_out_seconds(daemon, hang=False) for _ in range(repeat)]
            a.front.hang = 600.0
            start = time.monotonic()
            prober = Prober(daemon)
            hung = [scale_out_seconds(daemon, hang=True) for _ in range(repeat)]
            time.sleep(max(0.0, FAULT_S - (time.monotonic() - start)))
            prober.stop()
            gap = notify.longest_gap(start, time.monotonic())
        finally:
            daemon.stop()
            notify.close()
    delay = statistics.median(hung) - statistics.median(normal)
    print(
        f"provider hangs      healthy tier 1->3 once stored: {spread(hung)}; without the hang {spread(normal)}; "
        f"delay {delay:+.1f}s (tick {daemon.env['SCALECTL_TICK_INTERVAL']} s, deadline {DEADLINE} s); "
        f"longest watchdog gap {gap:.1f}s (WatchdogSec {WATCHDOG_S:g}); {prober.summary(start)}"
    )


def bench_postgres(tmp: Path) -> None:
    pg = PrivatePostgres()
    pg.start()
    proxy = HoldingProxy(pg.port)
    notify = NotifySocket()
    url = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/postgres"
    try:
        with two_accounts() as (a, b):
            daemon = DaemonUnderTest(tmp, a, b, SCALECTL_DATABASE_URL=url)
            try:
                daemon.apply(slow=1, healthy=1)
                daemon.start(NOTIFY_SOCKET=str(notify.path), WATCHDOG_USEC=str(int(WATCHDOG_S * 1e6)))
                wait_for("ready", lambda: get_json(daemon.url("/readyz"), 5)[0] == 200, seconds=120)
                for name, begin, end in (
                    ("PostgreSQL stopped ", pg.stop, pg.start),
                    ("PostgreSQL partition", proxy.hold.set, proxy.hold.clear),
                ):
                    prober = Prober(daemon)
                    start = time.monotonic()
                    begin()
                    time.sleep(FAULT_S)
                    gap = notify.longest_gap(start, time.monotonic())
                    status, body, _ = get_json(daemon.url("/v1/status"), 30)
                    end()
                    prober.stop()
                    shown = body.get("error", "")[:60] if isinstance(body, dict) else str(body)[:60]
                    print(
                        f"{name} longest watchdog gap {gap:.1f}s; {prober.summary(start)}; "
                        f"/v1/status {status} {shown!r}"
                    )
                    wait_for("ready again", lambda: get_json(daemon.url("/readyz"), 5)[0] == 200, seconds=120)
            finally:
                daemon.stop()
    finally:
        notify.close()
        proxy.close()
        pg.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=2, choices=[1, 2],
        help="scale-outs measured with and without the hang (Spheron's documented 10 creates per 15 min allow 2)",
    )  # fmt: skip
    parser.add_argument("--only", choices=["hang", "postgres"], help="one fault only")
    args = parser.parse_args()
    with TemporaryDirectory(prefix="bench-faults-") as tmp:
        if args.only in (None, "hang"):
            bench_hung_provider(Path(tmp) / "hang", args.repeat)
        if args.only in (None, "postgres"):
            bench_postgres(Path(tmp) / "pg")


if __name__ == "__main__":
    main()
