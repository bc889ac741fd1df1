"""`scalectl status` with no daemon running says so, says how old the figures are, lists no leader whose
lease has expired, and exits 4 (EXIT_NO_DAEMON); with a live heartbeat it exits 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.cli.output import EXIT_NO_DAEMON
from scalectl.clocks import SystemClock
from scalectl.controller.app import open_store
from scalectl.controller.ha.lease import GLOBAL_LEASE
from scalectl.controller.settings import Settings
from scalectl.controller.store import world_clock
from scalectl.controller.store.models import LeaderLeaseRecord, ReplicaRecord

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    runner = CliRunner()
    assert runner.invoke(app, ["apply", "-f", str(EXAMPLE)]).exit_code == 0
    return runner


def _daemon_seen(tmp_path: Path, ago: float) -> None:
    """What a daemon killed ``ago`` seconds ago (SIGKILL: no clean stop) leaves: its heartbeat, its lease
    (expiring 15 s after its last renewal) and its last published tick."""
    store = open_store(Settings(data_dir=tmp_path / "data"))
    at = SystemClock().now() - ago
    with store.sessions.begin() as s:
        s.add(ReplicaRecord(holder="h-1", host="box", pid=42, started_at=at - 60, seen_at=at, http=""))
        s.add(
            LeaderLeaseRecord(
                name=GLOBAL_LEASE,
                holder="h-1",
                host="box",
                pid=42,
                epoch=3,
                acquired_at=at - 60,
                renewed_at=at,
                expires_at=at + 15,
            )
        )
    world_clock.publish(store, speed=1.0, world=at, wall=at)
    store.engine.dispose()


def test_never_ran(cli: CliRunner) -> None:
    result = cli.invoke(app, ["status"])
    assert result.exit_code == EXIT_NO_DAEMON == 4
    assert "no daemon is running (none has run on this store)" in " ".join(result.stderr.split())
    document = json.loads(cli.invoke(app, ["status", "-o", "json"]).stdout)
    assert document["daemon"] == {"running": False, "last_seen": None, "data_age_s": None}


def test_a_daemon_that_stopped_ten_minutes_ago(cli: CliRunner, tmp_path: Path) -> None:
    _daemon_seen(tmp_path, ago=600)
    result = cli.invoke(app, ["status"])
    assert result.exit_code == 4
    assert "no daemon is running: last seen 10m ago" in " ".join(result.stderr.split())
    assert "stale" in result.stdout and "leader:" not in result.stdout
    printed = cli.invoke(app, ["status", "-o", "json"])
    assert printed.exit_code == 4
    document = json.loads(printed.stdout)
    assert document["leader"] is None and document["replicas"] == []
    assert document["daemon"]["running"] is False and 599 <= document["daemon"]["data_age_s"] <= 660


def test_a_running_daemon(cli: CliRunner, tmp_path: Path) -> None:
    _daemon_seen(tmp_path, ago=0)
    result = cli.invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert "leader: box pid 42, epoch 3" in result.stdout and "no daemon" not in result.output
