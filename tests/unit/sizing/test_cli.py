from __future__ import annotations

import json
import shlex
from pathlib import Path

from typer.testing import CliRunner

from scalectl.cli.main import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"


def test_plan_json_reproduces_the_reference() -> None:
    result = runner.invoke(app, ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100",
                                 "--weights", "fp8", "--kv-cache", "fp8", "--max-model-len", "4096",
                                 "--gpu-memory-utilization", "0.90", "--sessions", "100", "-o", "json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["kv_bytes_per_token"], data["slots_per_gpu"], data["gpus_needed"]) == (65536, 248, 1)
    assert data["cost_on_demand_per_hour"] == 2.40


def test_plan_table_prints_reasons() -> None:
    result = runner.invoke(app, ["plan", "-m", "llama-3.1-8b", "-g", "A100", "-s", "300"])
    assert result.exit_code == 0, result.output
    assert "slots_per_gpu" in result.stdout and "- KV cache: model dtype" in result.stdout


def test_plan_bad_input_exits_2_with_the_fix() -> None:
    bad = runner.invoke(app, ["plan", "-m", "llama-3.1-8b", "-g", "A100", "--weights", "fp8"])
    assert bad.exit_code == 2 and "bf16" in bad.output
    unknown = runner.invoke(app, ["plan", "-m", "acme/x", "-g", "H100"])
    assert unknown.exit_code == 2 and "config.json" in unknown.output
    long_ctx = runner.invoke(app, ["plan", "-m", "llama-3.1-70b", "-g", "H100", "--max-model-len", "131072",
                                   "--gpu-count", "1"])  # fmt: skip
    assert long_ctx.exit_code == 2 and "largest that fits" in long_ctx.output
    gpu = runner.invoke(app, ["plan", "-m", "llama-3.1-8b", "-g", "TPUv5"])
    assert gpu.exit_code == 2 and "unknown GPU" in gpu.output


def test_vllm_args_for_a_tier() -> None:
    result = runner.invoke(app, ["vllm-args", "-f", str(EXAMPLES), "--tier", "orchestrator"])
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.stdout)
    assert argv[:2] == ["vllm", "serve"] and "--kv-cache-dtype" in argv
    research = runner.invoke(app, ["vllm-args", "-f", str(EXAMPLES), "--tier", "research", "-o", "json"])
    data = json.loads(research.stdout)
    assert "--kv-cache-dtype" not in data["args"]  # A100 tier
    assert any(r.startswith("--max-num-seqs") for r in data["reasons"])


def test_vllm_args_unknown_tier() -> None:
    result = runner.invoke(app, ["vllm-args", "-f", str(EXAMPLES), "--tier", "nope"])
    assert result.exit_code == 2 and "orchestrator" in result.output
