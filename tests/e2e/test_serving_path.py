"""The serving path end to end: the daemon as a process with the local provider (real stand-in server
processes on loopback) and a private, real nginx. A steady stream of chat completions goes through nginx
while the tier scales 1 → 3 → 1; no request may fail, and every server process is gone at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import env_for, free_port, json_of, scalectl
from tests.services import repo_root

pytestmark = pytest.mark.e2e
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TICK = 0.3  # seconds between reconcile ticks

TIERS = """
tiers:
  chat:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [local]
    min: 0
    max: 3
    launch_timeout: 60s
    bootstrap_timeout: 60s
    drain_timeout: 30s
    policy: {{kind: external, class: "tests.e2e.steer:FilePolicy", options: {{path: "{target}"}}}}
    serving: {{max_model_len: 2048, target_concurrency: 16}}
providers:
  local:
    type: local
    options: {{state_dir: "{state}", cwd: "{root}", stop_grace_seconds: 10}}
"""
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "plan the next step"}], "max_tokens": 24}


# ---- a private nginx ------------------------------------------------------------------------------------
@dataclass
class Nginx:
    prefix: Path
    conf_d: Path
    main: Path
    proc: subprocess.Popen[bytes]


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    if not os.path.exists(NGINX):
        pytest.fail("nginx is not installed: apt-get update && apt-get install -y nginx-light")
    prefix = tmp_path / "nginx"
    conf_d = prefix / "conf.d"
    for d in ("conf.d", "body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"):
        (prefix / d).mkdir(parents=True)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    main = prefix / "nginx.conf"
    main.write_text(
        f"""{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log info;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {conf_d}/*.conf;
}}
"""
    )
    proc = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(main)], stderr=subprocess.PIPE)
    pid_file = prefix / "nginx.pid"
    for _ in range(200):  # bounded wait for the master to write its pid
        if pid_file.exists() and pid_file.read_text().strip():
            break
        if proc.poll() is not None:
            pytest.fail(f"nginx exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.05)
    try:
        yield Nginx(prefix, conf_d, main, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
        with httpx.Client(timeout=15) as client:
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


# ---- the daemon -------------------------------------------------------------------------------------------
@dataclass
class Fleet:
    data_dir: Path
    state_dir: Path
    target: Path
    status_url: str
    pids: set[int] = field(default_factory=set)

    def steer(self, count: int) -> None:
        tmp = self.target.with_suffix(".tmp")
        tmp.write_text(str(count))
        os.replace(tmp, self.target)

    def record_pids(self) -> None:
        for path in self.state_dir.glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.pids.add(int(json.loads(path.read_text())["pid"]))

    def status(self) -> dict[str, Any]:
        self.record_pids()
        try:
            rows = httpx.get(self.status_url, timeout=5).json()["tiers"]
        except (httpx.HTTPError, ValueError, KeyError):
            return {}
        return next((r for r in rows if r["tier"] == "chat"), {})

    def wait(self, what: str, predicate: Callable[[], bool], seconds: float = 90.0, log: Path | None = None) -> None:
        for _ in range(int(seconds / 0.1)):  # bounded
            if predicate():
                return
            time.sleep(0.1)
        tail = log.read_text()[-4000:] if log and log.exists() else ""
        raise AssertionError(f"timed out waiting for {what}; status {self.status()}\n{tail}")


def _alive(pid: int) -> bool:
    """The pid runs a stand-in (not a zombie, not a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z" and b"vllm_standin" in cmdline


def _counts(status: dict[str, Any]) -> tuple[int, int, int]:
    return status.get("ready", -1), status.get("pending", -1), status.get("draining", -1)


def test_requests_through_nginx_never_fail_while_the_tier_scales_1_3_1(tmp_path: Path, nginx: Nginx) -> None:
    data_dir, state_dir = tmp_path / "data", tmp_path / "instances"
    target = tmp_path / "target"
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text(TIERS.format(target=target, state=state_dir, root=repo_root()))
    http_port, lb_port = free_port(), free_port()
    fleet = Fleet(data_dir, state_dir, target, f"http://127.0.0.1:{http_port}/v1/status")
    fleet.steer(1)
    env = env_for(
        data_dir,
        SCALECTL_TICK_INTERVAL=str(TICK),
        SCALECTL_ROUTING="nginx",
        SCALECTL_ROUTING_NGINX_BIN=NGINX,
        SCALECTL_ROUTING_CONF_DIR=str(nginx.conf_d),
        SCALECTL_ROUTING_MAIN_CONF=str(nginx.main),
        SCALECTL_ROUTING_PREFIX=str(nginx.prefix),
        SCALECTL_ROUTING_LISTEN=json.dumps({"chat": f"127.0.0.1:{lb_port}"}),
    )
    log = tmp_path / "daemon.log"
    lb = f"http://127.0.0.1:{lb_port}/v1/chat/completions"
    load = Load(lb)
    with open(log, "w") as log_file:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "controller.cli.main", "daemon", "--config", str(tiers), "--port", str(http_port)],
            cwd=repo_root(),
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        # 1: one instance, ready and routed.
        fleet.wait("one ready instance", lambda: _counts(fleet.status()) == (1, 0, 0), log=log)
        fleet.wait("nginx to route to it", lambda: _answers(lb), log=log)
        load.start()
        fleet.wait("requests flowing", lambda: load.count() >= 20, seconds=30, log=log)

        # 1 → 3: the new instances join the upstream once ready.
        fleet.steer(3)
        fleet.wait("three ready instances", lambda: _counts(fleet.status()) == (3, 0, 0), log=log)
        at_three = time.monotonic()
        fleet.wait("traffic on all three", lambda: _spread(load, at_three, 15) == 3, seconds=30, log=log)

        # 3 → 1: two leave the upstream, drain and are deleted, under load.
        fleet.steer(1)
        fleet.wait("back to one instance", lambda: _counts(fleet.status()) == (1, 0, 0), log=log)
        at_one = time.monotonic()
        before = load.count()
        fleet.wait("more requests after the scale-in", lambda: load.count() >= before + 40, seconds=30, log=log)
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
        fleet.wait("no instances", lambda: _counts(fleet.status()) == (0, 0, 0), log=log)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0, log.read_text()[-3000:]
    finally:
        load.stop()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        fleet.record_pids()
        leftovers = [pid for pid in fleet.pids if _alive(pid)]
        for pid in leftovers:  # never leave servers behind, even when the test failed
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    assert len(fleet.pids) == 3, fleet.pids
    assert leftovers == [], f"stand-in processes still running: {leftovers}"
    assert list(state_dir.glob("*.json")) == []

    events = json_of(scalectl(data_dir, "events", "--limit", "1000", "-o", "json"))
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
