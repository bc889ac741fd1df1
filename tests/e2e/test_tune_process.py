"""`scalectl tune` as a process: killed outright, it leaves no search worker behind (each holds a day's
arrays; orphaned, they used to finish their trial and then wait on the task queue for good)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.helpers import env_for, repo_root

TIERS = """
tiers:
  web:
    capacity: on-demand
    gpu: L40S-48GB
    providers: [simulated]
    min: 1
    max: 6
    policy: {kind: min-floor, ttft_p95_max: 500ms}
"""

WORKLOAD = """
seed: 3
duration: 12h
tiers:
  web: {kind: poisson, rate: 12, ttft_target: 500ms}
cloud: {provision_delay: 60s}
"""

HANG_GUARD_S = 60.0  # polls stop here: a test that must end, not a timing assertion


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
        if ppid == parent and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


def _poll(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_search_workers_exit_when_the_search_is_killed(tmp_path: Path) -> None:
    (tmp_path / "tiers.yaml").write_text(TIERS)
    (tmp_path / "day.yaml").write_text(WORKLOAD)
    args = ["tune", "-f", str(tmp_path / "tiers.yaml"), "--workload", str(tmp_path / "day.yaml"), "--tier", "web",
            "--trials", "50", "--jobs", "2"]  # fmt: skip
    search = subprocess.Popen(
        [sys.executable, "-m", "cli.main", *args], cwd=repo_root(), env=env_for(tmp_path),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    workers: list[int] = []
    try:
        _poll(lambda: len(_children(search.pid)) == 2, "the search never started its two workers")
        workers = _children(search.pid)
        search.send_signal(signal.SIGKILL)  # nothing runs in the search process after this: no clean-up
        search.wait()
        _poll(lambda: not any(_running(pid) for pid in workers), f"workers {workers} outlived the search")
    finally:
        if search.poll() is None:
            search.kill()
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
