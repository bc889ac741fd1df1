"""`ttft_max` is the TTFT SLO's setting; the old `ttft_p95_max` is read as it, with one deprecation warning
per process; giving both is refused; the JSON Schema and every example use the new name."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from scalectl.policies import spec
from scalectl.tiers.config import ConfigError, parse_config
from scalectl.tiers.schema import tiers_schema_text

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = (ROOT / "examples" / "tiers.yaml").read_text()


def test_the_old_name_is_read_as_the_new_one_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(spec, "_warned", set())
    old = EXAMPLE.replace("ttft_max:", "ttft_p95_max:")
    assert old != EXAMPLE
    with caplog.at_level(logging.WARNING, logger="scalectl.config"):
        first = parse_config(old, "old.yaml")
        parse_config(old, "old.yaml")
    new = parse_config(EXAMPLE, "new.yaml")
    assert first.tiers["orchestrator"].policy == new.tiers["orchestrator"].policy
    assert first.tiers["orchestrator"].policy.ttft_target == 0.5  # type: ignore[union-attr]
    warnings = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert warnings == ["policy setting ttft_p95_max is deprecated: rename it ttft_max (same meaning)"]


def test_both_names_at_once_are_refused() -> None:
    both = EXAMPLE.replace("ttft_max: 500ms", "ttft_max: 500ms\n      ttft_p95_max: 400ms", 1)
    with pytest.raises(ConfigError, match="ttft_p95_max and ttft_max are the same setting"):
        parse_config(both, "both.yaml")


def test_the_schema_and_the_examples_use_the_new_name() -> None:
    schema = tiers_schema_text()
    assert '"ttft_max"' in schema and "ttft_p95_max" not in schema
    for path in [ROOT / "examples" / "tiers.yaml", *(ROOT / "examples" / "tiers").glob("*.yaml")]:
        assert "ttft_p95_max" not in path.read_text(), path
