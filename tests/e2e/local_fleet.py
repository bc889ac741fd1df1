"""The daemon as a process running one tier ("chat") on the local provider, steered through a file
(tests.e2e.steer:FilePolicy). Used by the serving-path and webhook end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.helpers import env_for, free_port
from tests.services import repo_root

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TICK = 0.3  # seconds between reconcile ticks
STEERED = '{{kind: external, class: "tests.e2e.steer:FilePolicy", options: {{path: "{target}"}}}}'

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
    policy: {policy}
    serving: {{max_model_len: 2048, target_concurrency: 16}}{extra}
providers:
  local:
    type: local
    options: {{state_dir: "{state}", cwd: "{root}", stop_grace_seconds: 10}}
"""


def tiers_yaml(
    target: Path, state_dir: Path, *, policy: str | None = None, max_instances: int = 3, extra: str = ""
) -> str:
    """The chat tier on the local provider: steered through ``target`` unless a ``policy`` is given."""
    steered = STEERED.format(target=target)
    text = TIERS.format(policy=policy or steered, extra=extra, state=state_dir, root=repo_root())
    return text.replace("    max: 3\n", f"    max: {max_instances}\n")


def alive(pid: int) -> bool:
    """The pid runs a stand-in (not a zombie, not a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z" and b"vllm_standin" in cmdline


@dataclass
class Fleet:
    data_dir: Path
    state_dir: Path
    target: Path
    http_port: int
    log: Path
    daemon: subprocess.Popen[bytes] | None = None
    pids: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def steer(self, count: int) -> None:
        tmp = self.target.with_suffix(".tmp")
        tmp.write_text(str(count))
        os.replace(tmp, self.target)

    def instances(self) -> list[dict[str, Any]]:
        """The local provider's state files: key, provider_id, pid, port of each running server."""
        found = []
        for path in sorted(self.state_dir.glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                found.append(json.loads(path.read_text()))
        self.pids.update(int(i["pid"]) for i in found if "pid" in i)
        return found

    def status(self) -> dict[str, Any]:
        self.instances()
        try:
            rows = httpx.get(f"{self.url}/v1/status", timeout=5).json()["tiers"]
        except (httpx.HTTPError, ValueError, KeyError):
            return {}
        return next((r for r in rows if r["tier"] == "chat"), {})

    def counts(self) -> tuple[int, int, int]:
        """(ready, pending, draining) of the tier; -1s while the daemon does not answer."""
        s = self.status()
        return s.get("ready", -1), s.get("pending", -1), s.get("draining", -1)

    def wait(self, what: str, predicate: Callable[[], bool], seconds: float = 90.0) -> None:
        for _ in range(int(seconds / 0.1)):  # bounded
            if predicate():
                return
            if self.daemon is not None and self.daemon.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; status {self.status()}\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""

    def stop(self) -> int:
        assert self.daemon is not None
        self.daemon.send_signal(signal.SIGTERM)
        return self.daemon.wait(timeout=30)

    def leftovers(self) -> list[int]:
        self.instances()
        return sorted(pid for pid in self.pids if alive(pid))


@contextlib.contextmanager
def local_fleet(
    tmp_path: Path, initial: int, *, policy: str | None = None, max_instances: int = 3, extra: str = "", **env: str
) -> Iterator[Fleet]:
    """Start the daemon with the chat tier steered to ``initial`` (or run by ``policy``, a flow-style YAML
    mapping; ``extra``: more lines of the tier); on the way out, stop it and kill any server it left (the
    test asserts there were none)."""
    state_dir = tmp_path / "instances"
    target = tmp_path / "target"
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text(tiers_yaml(target, state_dir, policy=policy, max_instances=max_instances, extra=extra))
    fleet = Fleet(tmp_path / "data", state_dir, target, free_port(), tmp_path / "daemon.log")
    fleet.steer(initial)
    argv = [sys.executable, "-m", "scalectl.cli.main", "daemon", "--config", str(tiers), "--port"]
    with open(fleet.log, "wb") as log:  # a file, not a pipe: nobody reads a pipe and it would fill up
        fleet.daemon = subprocess.Popen(
            [*argv, str(fleet.http_port)],
            cwd=repo_root(),
            env=env_for(fleet.data_dir, SCALECTL_TICK_INTERVAL=str(TICK), **env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield fleet
    finally:
        if fleet.daemon.poll() is None:
            fleet.daemon.kill()
            fleet.daemon.wait()
        for pid in fleet.leftovers():  # never leave servers behind, even when the test failed
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
