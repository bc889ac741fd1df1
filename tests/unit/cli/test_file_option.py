"""One spelling of the tiers file option, -f/--file, on every command (the old --filename and --config
still work, hidden), and TAB completes tier names from the -f file or the stored configuration."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from scalectl.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "tiers.yaml"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return CliRunner()


def _commands(group: click.Group, path: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, f"{path}{name} ")
        else:
            found.append((f"{path}{name}", command))
    return found


def test_every_file_option_is_spelled_dash_f_double_dash_file() -> None:
    commands = _commands(typer.main.get_command(app))  # type: ignore[arg-type]
    with_f = []
    for name, command in commands:
        for param in command.params:
            if "-f" in param.opts:
                assert param.opts == ["--file", "-f"] or set(param.opts) == {"--file", "-f"}, (name, param.opts)
                with_f.append(name)
            shown = not getattr(param, "hidden", False)
            assert not (shown and {"--filename", "--config"} & set(param.opts)), (name, param.opts)
    assert {"apply", "diff", "daemon", "simulate", "tune", "vllm-args", "backtest", "offers"} <= set(with_f)


@pytest.mark.parametrize("spelling", ["-f", "--file", "--filename"])
def test_apply_and_diff_take_every_spelling(cli: CliRunner, spelling: str) -> None:
    assert cli.invoke(app, ["diff", spelling, str(EXAMPLE)]).exit_code == 3  # nothing stored: all new
    result = cli.invoke(app, ["apply", spelling, str(EXAMPLE)])
    assert result.exit_code == 0 and "applied as config v1" in result.stdout, result.output


def test_the_old_spellings_are_hidden_and_a_missing_file_is_named(cli: CliRunner) -> None:
    for command in ("apply", "diff", "daemon"):
        shown = cli.invoke(app, [command, "--help"]).stdout
        assert "--file" in shown and "--filename" not in shown and "--config " not in shown
    result = cli.invoke(app, ["apply"])
    assert result.exit_code == 2 and "missing the tiers file: add -f/--file PATH" in result.stderr
    result = cli.invoke(app, ["apply", "-f", str(EXAMPLE), "--filename", str(EXAMPLE)])
    assert result.exit_code == 2 and "give the tiers file once" in result.stderr


def test_the_daemon_takes_its_old_config_spelling(cli: CliRunner) -> None:
    result = cli.invoke(app, ["daemon", "--config", str(EXAMPLE), "--ticks", "1", "--port", "0"])
    assert result.exit_code == 0, result.output
    assert cli.invoke(app, ["get", "tiers", "-o", "json"]).stdout.count('"orchestrator"') == 1


def _complete(tmp_path: Path, line: str) -> list[str]:
    words = line.split(" ")
    env = {
        "SCALECTL_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "_SCALECTL_COMPLETE": "complete_bash",
        "COMP_WORDS": line,
        "COMP_CWORD": str(len(words) - 1),
    }
    done = subprocess.run(
        [sys.executable, "-m", "scalectl.cli.main"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    return done.stdout.split()


def test_tab_completes_tier_names_from_the_store_and_from_the_file(cli: CliRunner, tmp_path: Path) -> None:
    assert _complete(tmp_path, "scalectl describe tier ") == []  # nothing stored yet
    cli.invoke(app, ["apply", "-f", str(EXAMPLE)])
    assert _complete(tmp_path, "scalectl describe tier ") == ["orchestrator", "research", "support-daytime"]
    assert _complete(tmp_path, "scalectl events --tier r") == ["research"]
    assert _complete(tmp_path, "scalectl rollout pause s") == ["support-daytime"]
    other = ROOT / "examples" / "tiers" / "support-fleet-day.yaml"
    assert _complete(tmp_path, f"scalectl vllm-args -f {other} --tier ") == ["support-daytime"]
