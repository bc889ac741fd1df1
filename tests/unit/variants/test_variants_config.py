"""`variants:`: other hardware that can serve a tier's model. A variant that cannot hold the model is refused
with the file, tier, field and fix, and nothing is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.cli.offers_cmd import requests_for
from scalectl.sizing.vllm_args import tune_vllm_args
from scalectl.tiers.config import ConfigError, parse_config
from tests.builders import min_floor, tier, tiers_yaml

LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def _text(variants: list[dict[str, object]], model: str = LLAMA_70B, gpu_count: int = 2) -> str:
    spec = tier("H100", gpu_count=gpu_count, policy=min_floor(1), variants=variants, serving={"model": model})
    return tiers_yaml({"chat": spec})


def test_variants_are_read_with_canonical_names_and_their_worth() -> None:
    fleet = parse_config(_text([{"gpu": "A100", "gpu_count": 2}, {"gpu": "l40s", "gpu_count": 2}]), "tiers.yaml")
    tier_ = fleet.tiers["chat"]
    assert tier_.hardware == (("H100-SXM5-80GB", 2), ("A100-80GB-PCIe", 2), ("L40S-48GB", 2))
    assert tier_.capacity_units("H100-SXM5-80GB", 2) == 1.0
    assert 0 < tier_.capacity_units("L40S-48GB", 2) < 1  # an L40S pair serves less of the 70B than two H100s


def test_a_variant_that_cannot_hold_the_model_is_refused_naming_file_field_and_fix() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_text([{"gpu": "A100", "gpu_count": 2}, {"gpu": "L40S"}]), "tiers.yaml")
    message = str(err.value)
    assert 'tiers.yaml: tier "chat": variants[1] (1× L40S-48GB) cannot hold the model' in message
    assert "gpu_count: 2" in message  # what would fit
    assert "remove it from `variants:`" in message


def test_the_primary_and_duplicates_are_not_variants() -> None:
    with pytest.raises(ConfigError, match=r"variants\[0\] \(2× H100-SXM5-80GB\): the tier's own gpu/gpu_count"):
        parse_config(_text([{"gpu": "H100-SXM5", "gpu_count": 2}]), "tiers.yaml")
    with pytest.raises(ConfigError, match=r"variants\[1\] .*listed twice"):
        parse_config(_text([{"gpu": "A100", "gpu_count": 2}, {"gpu": "A100-80GB-PCIe", "gpu_count": 2}]), "t")
    with pytest.raises(ConfigError, match=r"variants\[0\]\.gpu: unknown GPU"):
        parse_config(_text([{"gpu": "Z900"}]), "t")


def test_a_variant_of_a_model_the_catalogue_lacks_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"variants: cannot size serving.model"):
        parse_config(_text([{"gpu": "L40S"}], model="acme/in-house-13b", gpu_count=1), "t")


def test_a_variants_servers_are_tuned_by_the_vllm_args_rule_for_its_gpu() -> None:
    tier_ = parse_config(_text([{"gpu": "A100", "gpu_count": 2}]), "t").tiers["chat"]
    on_a100 = tier_.on("A100-80GB-PCIe", 2)
    assert (on_a100.gpu, on_a100.gpu_count, on_a100.variants) == ("A100-80GB-PCIe", 2, ())
    assert on_a100.serving == tier_.serving
    assert tier_.on("H100", 2) is tier_
    expected = tune_vllm_args(tier_.serving, "A100-80GB-PCIe", 2).args
    assert "--quantization" not in expected  # no FP8 on Ampere: the rule differs by GPU
    assert tune_vllm_args(on_a100.serving, on_a100.gpu, on_a100.gpu_count).args == expected


def test_diff_and_apply_refuse_it_and_store_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    path = tmp_path / "tiers.yaml"
    path.write_text(_text([{"gpu": "L40S"}]), encoding="utf-8")
    runner = CliRunner()
    for command in ("diff", "apply"):
        result = runner.invoke(app, [command, "-f", str(path)])
        assert result.exit_code == 2, result.output
        assert f'{path}: tier "chat": variants[0] (1× L40S-48GB) cannot hold the model' in result.output
    got = runner.invoke(app, ["get", "tiers", "-o", "json"])
    assert "chat" not in got.output  # nothing was stored


def test_vllm_args_prints_a_variants_command_line(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text(_text([{"gpu": "L40S", "gpu_count": 2}]), encoding="utf-8")
    result = CliRunner().invoke(app, ["vllm-args", "-f", str(path), "--tier", "chat", "--variant", "l40s"])
    assert result.exit_code == 0, result.output
    assert "--tensor-parallel-size 2" in result.output and "--kv-cache-dtype fp8" in result.output
    missing = CliRunner().invoke(app, ["vllm-args", "-f", str(path), "--tier", "chat", "--variant", "B200"])
    assert missing.exit_code == 2 and "no variant on B200-192GB" in missing.output


def test_simulate_refuses_it_naming_the_tiers_file(tmp_path: Path) -> None:
    tiers, workload = tmp_path / "tiers.yaml", tmp_path / "w.yaml"
    tiers.write_text(_text([{"gpu": "A100"}]), encoding="utf-8")
    workload.write_text("duration: 10m\ntiers: {chat: {kind: poisson, rate: 5, ttft_target: 500ms}}\n")
    result = CliRunner().invoke(app, ["simulate", "-f", str(tiers), "-w", str(workload)])
    assert result.exit_code == 2
    assert f'{tiers}: tier "chat": variants[0] (1× A100-80GB-PCIe) cannot hold the model' in result.output


def test_scalectl_offers_asks_for_the_variants_too() -> None:
    fleet = parse_config(_text([{"gpu": "A100", "gpu_count": 2}, {"gpu": "L40S", "gpu_count": 2}]), "t")
    asked = {(r.gpu, r.count) for r in requests_for(fleet, None, None, None)}
    assert asked == {("H100", 2), ("A100-80GB-PCIe", 2), ("L40S-48GB", 2)}
