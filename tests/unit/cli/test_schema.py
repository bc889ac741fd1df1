"""`scalectl schema`: the published JSON Schema is the generated one, accepts every example tiers file and
rejects what the loader rejects; `--version` and shell completion."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.tiers.config import ConfigError, parse_config
from scalectl.tiers.schema import tiers_schema, tiers_schema_text

ROOT = Path(__file__).resolve().parents[3]
PUBLISHED = ROOT / "docs" / "tiers.schema.json"
TIERS_FILES = sorted(
    [
        ROOT / "examples" / "tiers.yaml",
        ROOT / "controller" / "embedded" / "tiers.yaml",
        *(ROOT / "examples" / "tiers").glob("*.yaml"),
        *(ROOT / "deploy").glob("tiers*.yaml"),
    ]
)


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(PUBLISHED.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_published_schema_is_the_generated_one() -> None:
    assert PUBLISHED.read_text() == tiers_schema_text(), "regenerate it: scalectl schema --out docs/tiers.schema.json"


def test_scalectl_schema_prints_it() -> None:
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0 and json.loads(result.stdout) == tiers_schema()


@pytest.mark.parametrize("path", TIERS_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_tiers_file_validates(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    errors = [e.message for e in _validator().iter_errors(data)]
    assert errors == []
    parse_config(path.read_text(), str(path))  # and the loader agrees


BAD = {
    "misspelled field": ("    min: 1\n", "    min: 1\n    minn: 2\n"),
    "misspelled policy field": ("      floor: 2\n", "      flor: 2\n"),
    "unparsable duration": ("idle_after: 5m", "idle_after: five"),
    "unknown capacity": ("capacity: spot", "capacity: spto"),
    "unknown policy kind": ("kind: min-floor", "kind: hyperdrive"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_schema_rejects_what_the_loader_rejects(case: str) -> None:
    old, new = BAD[case]
    text = (ROOT / "examples" / "tiers.yaml").read_text()
    assert old in text
    bad = text.replace(old, new, 1)
    assert list(_validator().iter_errors(yaml.safe_load(bad)))
    with pytest.raises(ConfigError):
        parse_config(bad, "bad.yaml")


def test_durations_accept_numbers_and_units() -> None:
    text = (ROOT / "examples" / "tiers.yaml").read_text()
    for ok in ("idle_after: 300", "idle_after: 1h30m", "idle_after: 250ms", "idle_after: 2.5"):
        assert not list(_validator().iter_errors(yaml.safe_load(text.replace("idle_after: 5m", ok))))
        parse_config(text.replace("idle_after: 5m", ok))


def test_version_and_shell_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"scalectl {version('scalectl')}"
    # Name the shell instead of letting typer detect it from the parent process (none under CI); typer reads
    # this when it builds the command, before invoke() would apply an env= argument.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = runner.invoke(app, ["--show-completion", "bash"], prog_name="scalectl")
    assert result.exit_code == 0 and "complete " in result.stdout and "scalectl" in result.stdout


def test_the_bundled_demo_is_the_example_file() -> None:
    # The README's tour runs the demo, then `scalectl diff -f examples/tiers.yaml` and expects no change.
    bundled = (ROOT / "controller" / "embedded" / "tiers.yaml").read_text()
    assert bundled == (ROOT / "examples" / "tiers.yaml").read_text(), "keep the two files identical"


def _doc_tiers_blocks() -> list[tuple[str, str]]:
    blocks = []
    for doc in ("quickstart-runpod.md", "mapping.md"):
        text = (ROOT / "docs" / doc).read_text()
        blocks += [(doc, b) for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "\ntiers:\n" in f"\n{b}"]
    return blocks


@pytest.mark.parametrize(("doc", "block"), _doc_tiers_blocks(), ids=lambda v: v if v.endswith(".md") else "")
def test_tiers_files_in_the_guides_are_valid(doc: str, block: str) -> None:
    parse_config(block, doc)
    assert not list(_validator().iter_errors(yaml.safe_load(block)))
