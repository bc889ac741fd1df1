"""The kill storm with a warm pool: the daemon as a process, SIGKILLed again and again at random moments while
a steered tier with `warm_pool: {size: 2, max: 3}` grows and shrinks, against one simulated cloud served over
HTTP (it stops and starts machines, and its running means serving, so members fill, stop and are started).
Pool members are created, stopped, started and deleted around the kills; at the end no machine of ours runs
or sits stopped untracked, no row follows a machine that is gone, the pool holds at most its max, and no key
was created twice."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import daemon_log, free_port, start_daemon
from tests.e2e.test_kill_storm import ticks_done
from tests.fakes.simulated_cloud_server import start_simulated_cloud

pytestmark = pytest.mark.e2e
KILLS = int(os.environ.get("SCALECTL_KILL_STORM_KILLS", "50"))
PREFIX = "sc-"
TICK = 0.5
POOL_MAX = 3
TRACKED = ("pending", "provisioning", "bootstrapping", "ready", "draining", "stopped")


def tiers_yaml(url: str, target: Path) -> str:
    return f"""
tiers:
  web:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [sim]
    min: 0
    max: 6
    drain_timeout: 1s
    warm_pool: {{size: 2, max: {POOL_MAX}}}
    policy: {{kind: external, class: "tests.e2e.steer:FilePolicy", options: {{path: "{target}"}}}}
providers:
  sim:
    type: simulated-remote
    base_url: {url}
"""


def machines(url: str) -> list[dict[str, Any]]:
    """Our machines at the cloud that are not gone (running, booting or stopped)."""
    found = httpx.get(f"{url}/instances", params={"prefix": PREFIX}, timeout=5).json()
    return [m for m in found if m["status"] not in ("terminated", "preempted", "failed")]


def rows(data: Path) -> list[tuple[str, str, str, str | None]]:
    """(key, state, end_state, provider_id) of the tier's live rows."""
    with sqlite3.connect(data / "scalectl.db") as db:
        marks = ",".join("?" * len(TRACKED))
        query = f"SELECT key, state, end_state, provider_id FROM instances WHERE tier = 'web' AND state IN ({marks})"
        return [(k, s, e, p) for k, s, e, p in db.execute(query, TRACKED)]


def leaks(url: str, data: Path) -> tuple[set[str], set[str]]:
    """Machines no live row follows, and live rows whose machine is gone (provider ids)."""
    ours = {m["provider_id"] for m in machines(url)}
    followed = {p for _k, _s, _e, p in rows(data) if p}
    return ours - followed, followed - ours


def settled(url: str, data: Path, want: int) -> bool:
    """Every machine tracked and only those; the tier holds ``want`` serving, and the pool at most its max
    stopped and at least what it creates for: its size (2) less the instances above the floor (0), which
    scale-in brings back instead."""
    live = rows(data)
    serving = [r for r in live if r[1] == "ready" and r[2] != "stopped"]
    pool = [r for r in live if r[1] == "stopped" and r[2] == "stopped"]
    others = [r for r in live if r not in serving and r not in pool]
    filled = max(0, 2 - want) <= len(pool) <= POOL_MAX
    return leaks(url, data) == (set(), set()) and len(serving) == want and filled and not others


def wait_settled(url: str, data: Path, port: int, want: int) -> float:
    """Ticks from the daemon's first tick until settled (bounded at 60 s)."""
    deadline, first = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        try:
            ticks = ticks_done(port)
            if ticks >= 1 and first is None:
                first = ticks
            if first is not None and settled(url, data, want):
                return ticks_done(port) - first
        except (httpx.HTTPError, sqlite3.Error):
            pass  # the daemon writes as we read: ask again
        time.sleep(0.05)
    raise AssertionError(f"not settled 60 s after a restart: rows {rows(data)}, machines {machines(url)}")


def test_random_sigkills_with_a_warm_pool_leak_no_member_and_duplicate_nothing(tmp_path: Path) -> None:
    rng = random.Random(2027)
    target = tmp_path / "target"
    target.write_text("3")
    cloud, server = start_simulated_cloud(provision_delay_min=0.2, provision_delay_max=0.6, resume_delay_min=0.2,
                                          resume_delay_max=0.4)  # fmt: skip
    try:
        config = tmp_path / "tiers.yaml"
        config.write_text(tiers_yaml(server.url, target))
        env = {"SCALECTL_TICK_INTERVAL": str(TICK), "SCALECTL_OFFERS_TTL": "2"}
        measured = []
        for round_ in range(KILLS):
            target.write_text(str(rng.randint(0, 6)))
            if round_ % 5 == 4:  # every fifth restart runs until the tier and its pool have settled
                port = free_port()
                daemon = start_daemon(tmp_path, "--config", str(config), "--port", str(port), **env)
                measured.append(wait_settled(server.url, tmp_path, port, int(target.read_text())))
            else:
                daemon = start_daemon(tmp_path, "--config", str(config), "--port", "0", **env)
                time.sleep(rng.uniform(0.8, 3.0))  # kills land before, in and between ticks
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(timeout=10)

        want = rng.randint(1, 6)
        target.write_text(str(want))
        port = free_port()
        daemon = start_daemon(tmp_path, "--config", str(config), "--port", str(port), **env)
        try:
            measured.append(wait_settled(server.url, tmp_path, port, want))
            time.sleep(4 * TICK)
            assert settled(server.url, tmp_path, want), "did not stay settled"
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
        untracked, vanished = leaks(server.url, tmp_path)
        assert untracked == set() and vanished == set(), f"leaked: {untracked}; rows without machines: {vanished}"
        stopped = [m for m in machines(server.url) if m["status"] == "stopped"]
        assert len(stopped) <= POOL_MAX
        pooled = len(stopped)
        repeats = {k: n for k, n in Counter(m["key"] for m in machines(server.url)).items() if n > 1}
        assert not repeats, f"keys with two machines: {repeats}"
        ordered = sorted(measured)
        print(
            f"\n{KILLS} SIGKILLs, {len(measured)} restarts measured: settled {ordered[len(ordered) // 2]:g} ticks "
            f"after the first (median), {ordered[-1]:g} at most; 0 leaked; pool {pooled} stopped; "
            f"{cloud.calls['create']} creates, {cloud.calls['stop']} stops, {cloud.calls['start']} starts"
        )
        assert cloud.calls["stop"] > 0 and cloud.calls["start"] > 0  # the pool was filled and drawn on
        log = daemon_log(tmp_path).read_text()
        assert "Traceback" not in log, log[log.index("Traceback") - 2000 :]
    finally:
        server.stop()
