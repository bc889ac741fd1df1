"""`describe` and `events` read stored times in the daemon's world: under `daemon --speed 60` the rows are
stamped an accelerated clock ahead of the wall, and ages must still be positive and `--since` must filter."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.controller.app import open_store
from scalectl.controller.settings import Settings
from scalectl.controller.store import world_clock
from scalectl.controller.store.models import DecisionRecord, EventRecord

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"
SPEED = 60.0


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return CliRunner()


def _demo_history(running: bool) -> float:
    """A demo that started 30 real minutes ago at 60×: its world is now ~29.5 h ahead of the wall. One
    decision and one event per world hour; returns the world's now."""
    store = open_store(Settings())
    wall = time.time()
    started_wall = wall - 1800
    world = started_wall + 1800 * SPEED
    with store.sessions.begin() as s:
        for h in range(30):
            t = started_wall + h * 3600 + 1800
            s.add(DecisionRecord(tier="orchestrator", t=t, current=2, desired=3, reason=f"hour {h}", signals={}))
            s.add(EventRecord(t=t, tier="orchestrator", kind="launched", message=f"hour {h}"))
    world_clock.publish(store, speed=SPEED, world=world, wall=wall, running=running)
    return world


@pytest.mark.parametrize("running", [True, False])
def test_events_since_filters_in_the_demo_world_and_ages_are_never_negative(cli: CliRunner, running: bool) -> None:
    assert cli.invoke(app, ["apply", "-f", str(EXAMPLE)]).exit_code == 0
    world = _demo_history(running)
    result = cli.invoke(app, ["events", "--tier", "orchestrator", "--since", "2h", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {r["what"].split(": ")[-1] for r in rows} == {"hour 28", "hour 29"}
    assert all(world - 2 * 3600 - 5 <= r["t"] <= world for r in rows)

    table = cli.invoke(app, ["events", "--tier", "orchestrator", "--since", "2h"], terminal_width=200)
    assert table.exit_code == 0 and "-" not in "".join(line.split()[0] for line in _age_lines(table.stdout))
    if not running:  # a running 60× world moves a minute per CLI second: exact only when it stands still
        assert "30m ago" in table.stdout  # hour 29 is half a world hour old


def test_describe_ages_are_world_ages(cli: CliRunner) -> None:
    assert cli.invoke(app, ["apply", "-f", str(EXAMPLE)]).exit_code == 0
    _demo_history(running=False)
    result = cli.invoke(app, ["describe", "tier", "orchestrator", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    ages = [d["age"] for d in json.loads(result.stdout)["decisions"]]
    assert ages and not any(a.startswith("-") for a in ages)
    assert ages[-1] == "30m"  # the newest decision: half an hour of demo time ago, not -29 h


def test_without_a_published_clock_the_wall_is_now(cli: CliRunner) -> None:
    assert cli.invoke(app, ["apply", "-f", str(EXAMPLE)]).exit_code == 0
    result = cli.invoke(app, ["events", "--since", "1h", "-o", "json"])
    assert result.exit_code == 0 and {e["kind"] for e in json.loads(result.stdout)} == {"tier-added"}


def _age_lines(table: str) -> list[str]:
    return [line.strip("│ ") for line in table.splitlines() if " ago" in line]


def test_world_clock_stands_still_after_the_daemon_stopped() -> None:
    clock = world_clock.WorldClock(speed=60, world_at=1000.0, wall_at=10.0, running=False)
    assert clock.now(20.0) == 1010.0
    assert world_clock.WorldClock(speed=60, world_at=1000.0, wall_at=10.0, running=True).now(20.0) == 1600.0
    assert clock.now(5.0) == 1000.0  # never before the last published instant
