"""Run `scalectl` as a real process against a data directory of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port
from tests.services import repo_root

__all__ = ["daemon_log", "env_for", "free_port", "json_of", "scalectl", "start_daemon", "wait_for"]


def env_for(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALECTL_") and k != "DATABASE_URL"}
    env.update({"SCALECTL_DATA_DIR": str(data_dir), "PYTHONPATH": str(repo_root()), **extra})
    return env


def scalectl(data_dir: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalectl.cli.main", *args],
        cwd=repo_root(),
        env=env_for(data_dir, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_daemon(data_dir: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """The daemon in the background, its output in ``daemon_log(data_dir)`` (a pipe nobody reads would
    fill up and block the daemon)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with daemon_log(data_dir).open("a", encoding="utf-8") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "scalectl.cli.main", "daemon", *args],
            cwd=repo_root(),
            env=env_for(data_dir, **env),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )


def daemon_log(data_dir: Path) -> Path:
    return data_dir / "daemon.log"


def json_of(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_for(
    what: str, check: Callable[[], bool], seconds: float = 60, *, ignoring: tuple[type[Exception], ...] = ()
) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``seconds`` (a hang guard, not a timing
    assertion). Errors of the ``ignoring`` kinds count as not yet (a database the daemon is writing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except ignoring:
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for: {what}")
