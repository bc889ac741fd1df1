"""`get tiers -o yaml|json` is a tiers file `apply -f` takes back, and no output form shows a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.sources.redact import mask_secrets

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"
SECRET = "hunter2secret"
WITH_BROKER = EXAMPLE.read_text().replace(
    "    policy:",
    f"    signals: {{queue: {{broker_url: 'redis://:{SECRET}@127.0.0.1:6379/0', queues: [agents]}}}}\n    policy:",
    1,
)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return CliRunner()


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_get_tiers_output_applies_back_unchanged(cli: CliRunner, tmp_path: Path, fmt: str) -> None:
    assert cli.invoke(app, ["apply", "-f", str(EXAMPLE)]).exit_code == 0
    got = cli.invoke(app, ["get", "tiers", "-o", fmt])
    assert got.exit_code == 0
    path = tmp_path / f"t.{fmt}"
    path.write_text(got.stdout)
    diff = cli.invoke(app, ["diff", "-f", str(path)])
    assert diff.exit_code == 0 and "no changes" in diff.stdout, diff.output
    applied = cli.invoke(app, ["apply", "-f", str(path), "-o", "json"])
    assert applied.exit_code == 0, applied.output
    assert {t["change"] for t in json.loads(applied.stdout)["tiers"]} == {"unchanged"}


def test_a_version_that_is_not_one_is_refused(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("version: latest\n" + EXAMPLE.read_text())
    result = cli.invoke(app, ["apply", "-f", str(path)])
    assert result.exit_code == 2 and "version: expected the stored version" in " ".join(result.stderr.split())


def test_an_inline_broker_password_is_masked_in_every_output_form(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text(WITH_BROKER)
    assert cli.invoke(app, ["apply", "-f", str(path)]).exit_code == 0
    outputs = []
    for fmt in ("table", "json", "yaml"):
        outputs.append(cli.invoke(app, ["get", "tiers", "-o", fmt]).output)
        outputs.append(cli.invoke(app, ["describe", "tier", "orchestrator", "-o", fmt]).output)
    changed = tmp_path / "changed.yaml"
    changed.write_text(WITH_BROKER.replace("queues: [agents]", "queues: [agents, more]"))
    outputs.append(cli.invoke(app, ["diff", "-f", str(changed)]).output)
    outputs.append(cli.invoke(app, ["diff", "-f", str(changed), "-o", "json"]).output)
    assert all(SECRET not in out for out in outputs)
    assert "redis://:***@127.0.0.1:6379/0" in outputs[2]  # get tiers -o json: masked, not dropped


def test_applying_a_masked_password_back_is_refused(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text(WITH_BROKER)
    cli.invoke(app, ["apply", "-f", str(path)])
    copy = tmp_path / "copy.yaml"
    copy.write_text(cli.invoke(app, ["get", "tiers", "-o", "yaml"]).stdout)
    result = cli.invoke(app, ["apply", "-f", str(copy)])
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2
    assert 'tier "orchestrator": signals.queue.broker_url: the password is masked (***)' in message


def test_one_masking_covers_urls_and_secret_named_keys() -> None:
    document = {"providers": {"pod": {"options": {"api_key": "sk-123", "api_key_env": "RUNPOD_KEY"}}}}
    assert mask_secrets(document) == {
        "providers": {"pod": {"options": {"api_key": "***", "api_key_env": "RUNPOD_KEY"}}}
    }
    assert mask_secrets(["amqp://u:p@h/v", "http://h/x"]) == ["amqp://u:***@h/v", "http://h/x"]
