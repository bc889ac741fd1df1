"""Daemon log lines: ISO-8601 with the zone, text or JSON, the demo's time when the world runs faster."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.clocks import SystemClock
from scalectl.controller.logs import LogFormat, setup_logging

WORLD = 1_767_258_000.0  # 2026-01-01T09:00:00Z


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


def test_json_lines_carry_iso_times_level_logger_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", LogFormat.json)
    logging.getLogger("scalectl.test").info("tier %s scaled", "web")
    logging.getLogger("scalectl.test").debug("not shown at info")
    (line,) = _lines(capsys)
    record = json.loads(line)
    assert record["level"] == "INFO" and record["logger"] == "scalectl.test"
    assert record["message"] == "tier web scaled"
    assert datetime.fromisoformat(record["time"]).utcoffset() is not None  # has a zone
    assert record["world_time"] is None


def test_sped_up_worlds_log_their_own_time(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", LogFormat.json, world_now=lambda: WORLD, speed=60)
    logging.getLogger("scalectl.test").warning("late")
    record = json.loads(_lines(capsys)[0])
    assert datetime.fromisoformat(record["world_time"]).timestamp() == WORLD
    setup_logging("info", LogFormat.text, world_now=lambda: WORLD, speed=60)
    logging.getLogger("scalectl.test").warning("late")
    stamp, rest = _lines(capsys)[0].split(" ", 1)  # one clock leads every line: the wall's
    assert datetime.fromisoformat(stamp).utcoffset() is not None and datetime.fromisoformat(stamp) != WORLD
    assert rest == "WARNING [world 2026-01-01T09:00:00.000+00:00, demo ×60] late"


def test_no_world_time_until_the_demo_clock_is_set(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", LogFormat.json, world_now=lambda: None, speed=60)
    logging.getLogger("scalectl.test").info("starting")
    assert json.loads(_lines(capsys)[0])["world_time"] is None


def test_the_demo_daemon_logs_decisions_as_fields_under_one_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    started = SystemClock().now()
    result = CliRunner().invoke(app, ["daemon", "--speed", "60", "--ticks", "2", "--port", "0", "--log-format", "json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    decisions = [r for r in records if r["logger"] == "scalectl.reconciler" and "desired" in r]
    assert {r["tier"] for r in decisions} == {"orchestrator", "research", "support-daytime"}
    for r in decisions:
        assert isinstance(r["current"], int) and isinstance(r["desired"], int) and r["reason"]
        assert r["message"] == f"{r['tier']}: {r['current']} → {r['desired']}: {r['reason']}"
        assert r["world_time"] is not None
    # time is the wall clock on every line; world_time the demo's, never earlier than a previous line's
    assert all(abs(datetime.fromisoformat(r["time"]).timestamp() - started) < 600 for r in records)
    worlds = [datetime.fromisoformat(r["world_time"]).timestamp() for r in records if r["world_time"]]
    assert worlds == sorted(worlds) and worlds[-1] - worlds[0] < 3600


def test_text_lines_at_real_speed_show_the_wall_time_with_date_and_zone(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("warning", LogFormat.text, world_now=lambda: WORLD, speed=1.0)
    logging.getLogger("scalectl.test").info("hidden")
    logging.getLogger("scalectl.test").error("shown")
    (line,) = _lines(capsys)
    stamp, rest = line.split(" ", 1)
    assert datetime.fromisoformat(stamp).utcoffset() is not None and rest.split() == ["ERROR", "shown"]


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="debug, info, warning, error"):
        setup_logging("loud")


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    yield
    logging.basicConfig(force=True, handlers=[logging.NullHandler()])
