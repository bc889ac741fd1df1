"""The serving path end to end: the daemon as a process with the local provider (real stand-in server
processes on loopback) and a private, real nginx. A steady stream of chat completions goes through nginx
while the tier scales 1 → 3 → 1; no request may fail, and every server process is gone at the end.

The clients open a connection per request. With kept-alive client connections, nginx before 1.27.4 (no
``keepalive_min_timeout``) resets an idle connection that an old worker closes during *any* reload just as
the client reuses it; that race belongs to nginx reloads, not to draining, and clients must retry it
(docs/operations.md). Fresh connections keep this test about what scale-in itself does.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import free_port, json_of, scalectl
from tests.e2e.local_fleet import MODEL, local_fleet
from tests.private_nginx import NGINX, PrivateNginx, private_nginx

pytestmark = pytest.mark.e2e

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "plan the next step"}], "max_tokens": 24}


# ---- a private nginx ------------------------------------------------------------------------------------


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[PrivateNginx]:
    with private_nginx(tmp_path / "nginx", worker_connections=512, start_polls=200) as server:
        yield server


# ---- a steady stream of requests ------------------------------------------------------------------------
@dataclass
class Load:
    """Workers posting chat completions back to back through nginx, until stopped (bounded in count)."""

    url: str
    workers: int = 4
    max_requests: int = 50_000
    ok: list[tuple[float, str]] = field(default_factory=list)  # (when, upstream that answered)
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(self.workers)]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def count(self) -> int:
        with self._lock:
            return len(self.ok) + len(self.failed)

    def upstreams_since(self, since: float) -> set[str]:
        with self._lock:
            return {u for t, u in self.ok if t >= since}

    def _work(self) -> None:
        with httpx.Client(timeout=15, limits=httpx.Limits(max_keepalive_connections=0)) as client:
            while not self._stop.is_set() and self.count() < self.max_requests:
                try:
                    r = client.post(self.url, json=BODY)
                    good = r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
                    outcome = None if good else f"HTTP {r.status_code}: {r.text[:200]}"
                except (httpx.HTTPError, ValueError, KeyError) as exc:
                    outcome = f"{type(exc).__name__}: {exc}"
                with self._lock:
                    if outcome is None:
                        self.ok.append((time.monotonic(), r.headers.get("x-scalectl-upstream", "")))
                    else:
                        self.failed.append(outcome)


def test_requests_through_nginx_never_fail_while_the_tier_scales_1_3_1(tmp_path: Path, nginx: PrivateNginx) -> None:
    lb_port = free_port()
    lb = f"http://127.0.0.1:{lb_port}/v1/chat/completions"
    load = Load(lb)
    routing = {
        "SCALECTL_ROUTING": "nginx",
        "SCALECTL_ROUTING_NGINX_BIN": NGINX,
        "SCALECTL_ROUTING_CONF_DIR": str(nginx.conf_d),
        "SCALECTL_ROUTING_MAIN_CONF": str(nginx.main),
        "SCALECTL_ROUTING_PREFIX": str(nginx.prefix),
        "SCALECTL_ROUTING_LISTEN": json.dumps({"chat": f"127.0.0.1:{lb_port}"}),
    }
    with local_fleet(tmp_path, 1, **routing) as fleet:
        try:
            # 1: one instance, ready and routed.
            fleet.wait("one ready instance", lambda: fleet.counts() == (1, 0, 0))
            fleet.wait("nginx to route to it", lambda: _answers(lb))
            load.start()
            fleet.wait("requests flowing", lambda: load.count() >= 20, seconds=30)

            # 1 → 3: the new instances join the upstream once ready.
            fleet.steer(3)
            fleet.wait("three ready instances", lambda: fleet.counts() == (3, 0, 0))
            at_three = time.monotonic()
            fleet.wait("traffic on all three", lambda: _spread(load, at_three, 15) == 3, seconds=30)

            # 3 → 1: two leave the upstream, drain and are deleted, under load.
            fleet.steer(1)
            fleet.wait("back to one instance", lambda: fleet.counts() == (1, 0, 0))
            at_one = time.monotonic()
            before = load.count()
            fleet.wait("more requests after the scale-in", lambda: load.count() >= before + 40, seconds=30)
        finally:
            load.stop()

        assert load.failed == [], f"{len(load.failed)} failed requests, e.g. {load.failed[:5]}"
        # nginx lists every server it tried: more than one means a server refused or dropped a request.
        retried = [u for _, u in load.ok if "," in u]
        assert retried == [], f"{len(retried)} requests had to be retried on another server, e.g. {retried[:3]}"
        assert len(load.upstreams_since(at_one)) == 1
        served_by = {u for _, u in load.ok}
        assert len(served_by) == 3, served_by

        # And to zero, so the last server goes too; then a clean stop.
        fleet.steer(0)
        fleet.wait("no instances", lambda: fleet.counts() == (0, 0, 0))
        assert fleet.stop() == 0, fleet.log_tail()
        assert len(fleet.pids) == 3, fleet.pids
        assert fleet.leftovers() == [], "stand-in processes still running"
        assert list(fleet.state_dir.glob("*.json")) == []

    events = json_of(scalectl(fleet.data_dir, "events", "--limit", "1000", "-o", "json"))
    kinds = [e["kind"] for e in events if e.get("tier") == "chat"]
    assert kinds.count("ready") == 3 and kinds.count("retired") == 3, kinds
    assert "failed" not in kinds and "lost" not in kinds
    # Drained by the /metrics check, not cut off by the drain timeout.
    assert not [e for e in events if "drain timeout" in e.get("what", "")]


def _spread(load: Load, since: float, each: int) -> int:
    """How many upstreams served at least ``each`` requests since ``since``."""
    with load._lock:
        counts = Counter(u for t, u in load.ok if t >= since)
    return sum(1 for n in counts.values() if n >= each)


def _answers(url: str) -> bool:
    try:
        return httpx.post(url, json=BODY, timeout=10).status_code == 200
    except httpx.HTTPError:
        return False
