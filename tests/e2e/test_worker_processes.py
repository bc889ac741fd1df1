"""`scalectl tune` and `scalectl simulate` as processes: killed outright, they leave no worker process
behind (a search's trials, a simulation's baselines; each holds a day's arrays). Orphaned, workers used to
finish the job they held and then wait on the task queue for good."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import env_for, repo_root, wait_for

TIERS = """
tiers:
  web:
    capacity: on-demand
    gpu: L40S-48GB
    providers: [simulated]
    min: 1
    max: 6
    policy: {kind: min-floor, ttft_max: 500ms}
"""

WORKLOAD = """
seed: 3
duration: 24h
tiers:
  web: {kind: poisson, rate: 40, ttft_target: 500ms}
cloud: {provision_delay: 60s}
"""
BASELINE_JOBS = 3  # a serving tier's baselines: the oracle with the static fleet, KEDA/HPA, SkyServe-style


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"resource_tracker" not in cmdline:
            found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


@pytest.mark.parametrize(
    ("command", "workers"),
    [
        (["tune", "--tier", "web", "--trials", "50", "--jobs", "2"], 2),
        (["simulate"], min(BASELINE_JOBS, os.cpu_count() or 1)),
    ],
    ids=["tune", "simulate"],
)
def test_workers_exit_when_their_process_is_killed(tmp_path: Path, command: list[str], workers: int) -> None:
    (tmp_path / "tiers.yaml").write_text(TIERS)
    (tmp_path / "day.yaml").write_text(WORKLOAD)
    files = ["-f", str(tmp_path / "tiers.yaml"), "--workload", str(tmp_path / "day.yaml")]
    parent = subprocess.Popen(
        [sys.executable, "-m", "scalectl.cli.main", command[0], *files, *command[1:]], cwd=repo_root(),
        env=env_for(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    started: list[int] = []
    try:
        wait_for(f"{command[0]} to start its {workers} workers", lambda: len(_children(parent.pid)) == workers)
        started = _children(parent.pid)
        parent.send_signal(signal.SIGKILL)  # nothing runs in the parent after this: no clean-up
        parent.wait()
        wait_for(f"workers {started} to exit with {command[0]}", lambda: not any(_running(pid) for pid in started))
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
