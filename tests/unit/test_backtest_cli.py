"""`scalectl backtest`: formats, and bad input exits 2 with a message naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.cli.output import EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TIERS = str(REPO / "examples" / "tiers.yaml")
T0 = 1_773_057_600.0

runner = CliRunner()


def timeline(tmp_path: Path, *rows: dict[str, object] | str) -> str:
    path = tmp_path / "timeline.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return str(path)


ROWS = (
    {"t": T0, "tier": "research", "queue_depth": 37, "in_flight": 0},
    {"t": T0 + 31, "tier": "research", "queue_depth": 37, "in_flight": 0},
)


def test_json_output_is_one_object_per_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["backtest", "-f", EXAMPLE_TIERS, "--signals", timeline(tmp_path, *ROWS), "-o", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["desired"] for r in rows] == [0, 2]
    assert rows[1] == {"t": T0 + 31, "tier": "research", "desired": 2, "reason": "queue 37 > 20 × 0 for 31s → 2"}


def test_yaml_output(tmp_path: Path) -> None:
    result = runner.invoke(app, ["backtest", "-f", EXAMPLE_TIERS, "-s", timeline(tmp_path, *ROWS), "-o", "yaml"])
    assert result.exit_code == 0, result.output
    assert [r["desired"] for r in yaml.safe_load(result.stdout)] == [0, 2]


def test_table_output_shows_readable_times_and_reasons(tmp_path: Path) -> None:
    result = runner.invoke(app, ["backtest", "-f", EXAMPLE_TIERS, "-s", timeline(tmp_path, *ROWS)])
    assert result.exit_code == 0, result.output
    assert "2026-03-09T12:00:31Z" in result.stdout
    assert "queue 37 > 20 × 0 for 31s → 2" in result.stdout


def test_bad_line_exits_with_usage_error_and_prints_nothing_on_stdout(tmp_path: Path) -> None:
    path = timeline(tmp_path, ROWS[0], {"t": T0 + 1, "tier": "nope"})
    result = runner.invoke(app, ["backtest", "-f", EXAMPLE_TIERS, "-s", path, "-o", "json"])
    assert result.exit_code == EXIT_USAGE
    assert result.stdout == ""
    assert "timeline.jsonl: line 2: unknown tier" in result.stderr
    assert "orchestrator, research, support-daytime" in result.stderr


def test_bad_tiers_file_exits_with_usage_error(tmp_path: Path) -> None:
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text("tiers:\n  x:\n    capacity: sometimes\n")
    result = runner.invoke(app, ["backtest", "-f", str(tiers), "-s", timeline(tmp_path, *ROWS)])
    assert result.exit_code == EXIT_USAGE
    assert "tiers.yaml" in result.stderr


def test_missing_signals_file_exits_with_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["backtest", "-f", EXAMPLE_TIERS, "-s", str(tmp_path / "none.jsonl")])
    assert result.exit_code == EXIT_USAGE
    assert "none.jsonl: cannot read the file" in result.stderr
