"""A GPU the catalogue does not know is refused by `diff`, `apply` and the daemon's start, with the
closest names; nothing is stored, and the daemon exits with one line instead of failing every tick. A model the
catalogue lacks is allowed (in-house models) with a warning that names the closest catalogue names."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.controller.app import open_store
from scalectl.controller.settings import Settings
from scalectl.controller.store.models import ConfigVersion

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"
TYPO_GPU = EXAMPLE.read_text().replace("gpu: H100-SXM5-80GB", "gpu: H100-SXM6", 1)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return CliRunner()


@pytest.mark.parametrize("command", ["diff", "apply"])
def test_an_unknown_gpu_is_refused_with_the_closest_name(cli: CliRunner, tmp_path: Path, command: str) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text(TYPO_GPU)
    result = cli.invoke(app, [command, "-f", str(path)])
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2, result.output
    assert "tier \"orchestrator\": gpu: unknown GPU 'H100-SXM6'; did you mean H100-SXM5-80GB" in message
    assert "set `gpu:` to one of them" in message and "Nothing was changed" in message
    assert cli.invoke(app, ["get", "tiers", "-o", "json"]).stdout.count('"version": null') == 1


def test_a_model_the_catalogue_lacks_is_applied_with_a_warning_naming_the_closest(
    cli: CliRunner, tmp_path: Path
) -> None:
    # In-house models are allowed (they launch with plain vLLM arguments): a warning, not a refusal.
    path = tmp_path / "tiers.yaml"
    text = EXAMPLE.read_text().replace("    policy:", "    serving: {model: Qwen/Qwen3-8C}\n    policy:", 1)
    path.write_text(text)
    result = cli.invoke(app, ["apply", "-f", str(path)])
    message = " ".join(result.stderr.split())
    assert result.exit_code == 0, result.output
    assert "warning:" in message and 'tier "orchestrator": serving.model: unknown model' in message
    assert "(did you mean Qwen/Qwen3-8B" in message and "untuned vLLM arguments" in message


def test_the_daemon_refuses_a_stored_config_it_cannot_load(cli: CliRunner, tmp_path: Path) -> None:
    assert cli.invoke(app, ["apply", "-f", str(EXAMPLE)]).exit_code == 0
    store = open_store(Settings(data_dir=tmp_path / "data"))
    with store.sessions.begin() as s:  # what an older release (or a hand edit) could have stored
        s.execute(update(ConfigVersion).values(text=TYPO_GPU))
    store.engine.dispose()
    result = cli.invoke(app, ["daemon", "--ticks", "1", "--port", "0"])
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2, result.output
    assert "stored config v1: tier \"orchestrator\": gpu: unknown GPU 'H100-SXM6'" in message
    assert "the daemon cannot run this stored configuration" in message and "scalectl apply -f" in message
    assert "Traceback" not in result.output
    again = open_store(Settings(data_dir=tmp_path / "data"))  # the lease was handed back: a fixed file runs
    assert again.config.version() == 1
