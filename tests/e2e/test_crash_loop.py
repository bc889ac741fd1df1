"""The daemon as a process with a server that dies as soon as it starts (the local provider running a
command that exits): relaunches slow down — at most 4 in the first minute, with growing gaps — and
events say why. On loopback only."""

from __future__ import annotations

import itertools
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import start_daemon
from tests.services import repo_root

pytestmark = pytest.mark.e2e


def tiers_yaml(state: Path) -> str:
    dies = [sys.executable, "-c", "import sys; sys.exit(3)"]
    return f"""
tiers:
  chat:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [local]
    min: 1
    max: 3
    policy: {{kind: min-floor, floor: 1}}
providers:
  local:
    type: local
    options: {{state_dir: "{state}", cwd: "{repo_root()}", command: {dies!r}}}
"""


def query(data: Path, sql: str) -> list[dict[str, Any]]:
    try:
        with sqlite3.connect(data / "scalectl.db") as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(sql)]
    except sqlite3.Error:
        return []  # not created yet, or busy: ask again


def test_a_crash_looping_server_is_relaunched_with_growing_gaps(tmp_path: Path) -> None:
    config = tmp_path / "tiers.yaml"
    config.write_text(tiers_yaml(tmp_path / "local-state"))
    daemon = start_daemon(tmp_path, "--config", str(config), "--port", "0", SCALECTL_TICK_INTERVAL="1")
    try:
        deadline = time.monotonic() + 120
        launches: list[float] = []
        while time.monotonic() < deadline:
            rows = query(tmp_path, "SELECT created_at FROM instances ORDER BY created_at")
            launches = [r["created_at"] for r in rows]
            if launches and time.time() - launches[0] >= 61:  # the daemon's clock is the system's
                break  # the first minute is complete
            time.sleep(0.5)
        else:
            if not launches:
                pytest.fail("nothing was launched")
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        finally:
            if daemon.poll() is None:
                daemon.kill()
    first_minute = [t for t in launches if t - launches[0] < 60]
    assert 2 <= len(first_minute) <= 4, launches
    gaps = [b - a for a, b in itertools.pairwise(launches)]
    assert all(later > earlier for earlier, later in itertools.pairwise(gaps)), gaps
    events = query(tmp_path, "SELECT message FROM events WHERE kind = 'crash-backoff'")
    assert events and "early failure" in events[-1]["message"]
