"""The daemon as a process under faults of its dependencies: one provider account that hangs, PostgreSQL
stopped, PostgreSQL partitioned (a proxy that holds every byte). What must hold: other tiers go on, systemd's
watchdog keeps being fed while the loop lives, /readyz and /v1/status say what is wrong in one line, and the
HTTP surface answers whatever the database does.

Measured before (bench/bench_faults_health.py has the numbers now): a hung provider stalled the tick 94 s and
starved the watchdog 74 s; with PostgreSQL stopped /readyz answered 200 and /v1/status 500 with a traceback;
partitioned, /healthz went unanswered 41 s. The waits below are hang guards, generous for a loaded machine,
not speed assertions: the benchmark measures the times (tests/unit/test_call_deadline.py and
tests/unit/reconciler/test_slow_provider.py check, by order not time, that no tick waits on a silent account)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from scalectl.clocks import SystemClock
from tests.e2e.faults import HangingFront, HoldingProxy, NotifySocket, get_json
from tests.e2e.helpers import daemon_log, free_port, scalectl, start_daemon, wait_for
from tests.e2e.test_high_availability import PrivatePostgres
from tests.fakes import LoopbackServer
from tests.fakes.spheron_server import API_KEY, SSH_KEY_ID, TEAM_ID, FakeSpheron

pytestmark = pytest.mark.e2e
TICK = "1"
DEADLINE = "2"
WATCHDOG_S = 6.0


def fleet_yaml(url_a: str, url_b: str, slow: int, healthy: int) -> str:
    def tier(name: str, provider: str, floor: int) -> str:
        return f"""
  {name}:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [{provider}]
    min: {floor}
    max: {floor}
    drain_timeout: 0s
    policy: {{kind: min-floor, floor: {floor}}}"""

    def provider(name: str, url: str) -> str:
        return f"""
  {name}:
    type: spheron
    base_url: {url}
    options: {{ssh_key_id: {SSH_KEY_ID}, team_id: {TEAM_ID}}}"""

    return (
        "tiers:"
        + tier("slow", "spheron-a", slow)
        + tier("healthy", "spheron-b", healthy)
        + "\nproviders:"
        + provider("spheron-a", url_a)
        + provider("spheron-b", url_b)
        + "\n"
    )


class Account:
    """One provider account: a fake Spheron API behind a front that can hang; deployments boot at once."""

    def __init__(self) -> None:
        self.fake = FakeSpheron(SystemClock(), minimum_runtime_minutes=0)
        self.front = HangingFront(self.fake.app)
        self.server = LoopbackServer(self.front).start()

    def live(self) -> int:
        with self.fake.lock:
            for d in self.fake.deployments.values():
                if d["status"] == "deploying":
                    d["status"] = "running"
        return len(self.fake.live())

    def close(self) -> None:
        self.front.hang = 0
        self.server.stop()


@contextlib.contextmanager
def two_accounts() -> Iterator[tuple[Account, Account]]:
    a, b = Account(), Account()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


class DaemonUnderTest:
    def __init__(self, tmp: Path, a: Account, b: Account, **env: str) -> None:
        self.tmp, self.a, self.b = tmp, a, b
        tmp.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.env = {
            "SCALECTL_SPHERON_API_KEY": API_KEY,
            "SCALECTL_TICK_INTERVAL": TICK,
            "SCALECTL_PROVIDER_CALL_DEADLINE": DEADLINE,
            "SCALECTL_LEADER_LEASE_TTL": "4",
            **env,
        }
        self.proc: subprocess.Popen[str] | None = None

    def apply(self, slow: int, healthy: int) -> None:
        config = self.tmp / f"fleet-{slow}-{healthy}.yaml"
        config.write_text(fleet_yaml(self.a.server.url, self.b.server.url, slow, healthy))
        result = scalectl(self.tmp / "data", "apply", "-f", str(config), **self.env)
        assert result.returncode == 0, result.stderr

    def start(self, **env: str) -> None:
        self.proc = start_daemon(self.tmp / "data", "--port", str(self.port), **self.env, **env)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def log(self) -> str:
        return daemon_log(self.tmp / "data").read_text()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def test_a_hung_provider_leaves_other_tiers_and_the_watchdog_alone(tmp_path: Path) -> None:
    notify = NotifySocket()
    with two_accounts() as (a, b):
        daemon = DaemonUnderTest(tmp_path, a, b)
        try:
            daemon.apply(slow=1, healthy=1)
            daemon.start(NOTIFY_SOCKET=str(notify.path), WATCHDOG_USEC=str(int(WATCHDOG_S * 1e6)))
            wait_for("one instance in each tier", lambda: a.live() == 1 and b.live() == 1, seconds=90)
            a.front.hang = 600.0  # every request to account A now waits ten minutes
            hung_at = time.monotonic()
            daemon.apply(slow=2, healthy=3)
            # A tick held by A's calls (the old daemon: each waited out its 30 s timeout and retries) would
            # leave B at one instance far past this bound.
            wait_for("the healthy tier at 3 while account A hangs", lambda: b.live() == 3, seconds=30)
            time.sleep(3 * WATCHDOG_S)  # and the watchdog keeps being fed while A still hangs
            gap = notify.longest_gap(hung_at, time.monotonic())
            assert a.front.hung >= 1
            assert a.live() == 1  # the slow tier kept what it had
            assert gap <= WATCHDOG_S, f"no WATCHDOG=1 for {gap:.1f}s (WatchdogSec {WATCHDOG_S:g}s)"
            engine = create_engine(f"sqlite:///{tmp_path / 'data' / 'scalectl.db'}")
            with engine.connect() as conn:
                said = conn.execute(
                    text("SELECT message FROM events WHERE tier = 'slow' AND kind = 'provider-unanswered'")
                ).all()
            engine.dispose()
            assert said and "no answer within 2s" in said[0][0], said  # the slow tier says why it holds
        finally:
            daemon.stop()
            notify.close()
    assert "Traceback" not in daemon.log()


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    pg.start()
    try:
        yield pg
    finally:
        pg.remove()


def test_postgresql_stopped_then_partitioned_health_answers(tmp_path: Path, private_pg: PrivatePostgres) -> None:
    proxy = HoldingProxy(private_pg.port)
    db_url = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/postgres"
    with two_accounts() as (a, b):
        daemon = DaemonUnderTest(tmp_path, a, b, SCALECTL_DATABASE_URL=db_url)
        try:
            daemon.apply(slow=1, healthy=1)
            daemon.start()
            wait_for("ready", lambda: get_json(daemon.url("/readyz"), 5)[0] == 200, seconds=90)

            # Stopped: not ready within a couple of ticks, the reason in the body; status is one line.
            private_pg.stop()
            wait_for("/readyz 503 with PostgreSQL stopped", lambda: get_json(daemon.url("/readyz"), 5)[0] == 503, 15)
            status, body, _ = get_json(daemon.url("/readyz"), 5)
            assert "store" in body["reason"], body
            status, body, _ = get_json(daemon.url("/v1/status"), 10)
            assert status == 503 and isinstance(body, dict) and set(body) == {"error"}, (status, body)
            assert "\n" not in body["error"] and "Traceback" not in body["error"]
            assert get_json(daemon.url("/healthz"), 5)[0] == 200
            private_pg.start()
            wait_for("ready again", lambda: get_json(daemon.url("/readyz"), 5)[0] == 200, seconds=60)

            # Partitioned: every byte held. The HTTP surface answers; readiness says the store is not answering.
            proxy.hold.set()
            held_at = time.monotonic()
            answered = []
            while time.monotonic() - held_at < 12:
                answered.append(get_json(daemon.url("/healthz"), 5)[0])
                time.sleep(0.5)
            assert answered and all(s == 200 for s in answered), answered
            status, body, _ = get_json(daemon.url("/readyz"), 5)
            assert status == 503 and "store" in body["reason"], (status, body)
            assert get_json(daemon.url("/v1/status"), 15)[0] == 503
            assert get_json(daemon.url("/metrics"), 5)[0] == 200
            proxy.hold.clear()
            wait_for("ready after the partition", lambda: get_json(daemon.url("/readyz"), 5)[0] == 200, seconds=90)
        finally:
            daemon.stop()
            proxy.close()
    assert "Traceback" not in daemon.log()
