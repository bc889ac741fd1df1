"""The demo: which tiers read the synthetic load (also after `apply` and a restart), where its accelerated
clock starts, and `signals` saying "no source configured" at once instead of waiting to print nulls."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.controller.embedded.demo_clock import DEMO_ZONE, demo_start, world_start
from scalectl.controller.embedded.routing import reads_synthetic_load
from scalectl.tiers.config import parse_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiers.yaml"


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_tiers_without_sources_on_the_simulated_cloud_read_the_synthetic_load() -> None:
    text = EXAMPLE.read_text()
    fleet = parse_config(text)
    assert all(reads_synthetic_load(fleet, t) for t in fleet.tiers)  # the example as applied by hand, too
    with_queue = text.replace(
        "    policy:\n      kind: scale-to-zero",
        "    signals: {queue: {broker_url: 'redis://127.0.0.1:6379/0', queues: [research]}}\n"
        "    policy:\n      kind: scale-to-zero",
    )
    fleet = parse_config(with_queue)
    assert not reads_synthetic_load(fleet, "research") and reads_synthetic_load(fleet, "orchestrator")
    real = parse_config(text.replace("[simulated]", "[lambda]", 1) + "providers: {lambda: {type: lambda}}\n")
    assert not reads_synthetic_load(real, "orchestrator")
    assert not reads_synthetic_load(real, "no-such-tier")


@pytest.mark.parametrize(
    ("wall", "start"),
    [
        ("2026-11-23T01:30:00-05:00", "2026-11-20T07:00:00-05:00"),  # Monday night: last Friday morning
        ("2026-11-24T09:00:00-05:00", "2026-11-24T07:00:00-05:00"),  # Tuesday 09:00: this morning
        ("2026-11-22T12:00:00-05:00", "2026-11-20T07:00:00-05:00"),  # Sunday
        ("2026-07-15T06:59:00-04:00", "2026-07-14T07:00:00-04:00"),  # summer time, just before 07:00
    ],
)
def test_the_demo_world_starts_before_business_hours_in_new_york(wall: str, start: str) -> None:
    assert demo_start(_epoch(wall)) == _epoch(start)
    local = datetime.fromtimestamp(demo_start(_epoch(wall)), DEMO_ZONE)
    assert (local.hour, local.minute) == (7, 0) and local.weekday() < 5


def test_a_restarted_demo_continues_its_own_time() -> None:
    wall = _epoch("2026-11-24T09:00:00-05:00")
    later = _epoch("2026-11-24T13:30:00-05:00")
    assert world_start(wall, later) == later
    assert world_start(wall, None) == demo_start(wall)
    assert world_start(wall, 0.0) == demo_start(wall)


def test_signals_without_a_source_says_so_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["signals", "-f", str(EXAMPLE), "--window", "1h", "-o", "json"])
    assert result.exit_code == 0, result.stderr  # a one-hour window would time the test out if it waited
    rows = json.loads(result.stdout)
    assert {r["tier"] for r in rows} == {"orchestrator", "research", "support-daytime"}
    for row in rows:
        assert row["queue_depth"] is None and row["errors"]["signals"].startswith("no source configured")


def test_describe_says_no_source_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    assert runner.invoke(app, ["apply", "-f", str(EXAMPLE)]).exit_code == 0
    result = runner.invoke(app, ["describe", "tier", "research", "-o", "json"])
    assert json.loads(result.stdout)["signal_errors"]["signals"].startswith("no source configured")
