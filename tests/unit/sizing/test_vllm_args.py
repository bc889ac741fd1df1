"""Tuned vLLM flags: H100 vs A100 choices, the caps, and the reasons."""

from __future__ import annotations

import pytest

from scalectl.sizing.errors import Fp8Unsupported, SizingError, UnknownModel
from scalectl.sizing.spec import ServingSpec
from scalectl.sizing.vllm_args import tune_vllm_args


def _flags(args: tuple[str, ...]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        name = args[i]
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[name] = args[i + 1]
            i += 2
        else:
            out[name] = None
            i += 1
    return out


def test_h100_gets_fp8_and_the_case_study_flags() -> None:
    tuned = tune_vllm_args(ServingSpec(), "H100-SXM5-80GB", drain_timeout=120)
    f = _flags(tuned.args)
    assert f["--quantization"] == "fp8" and f["--kv-cache-dtype"] == "fp8"
    assert f["--max-model-len"] == "4096"
    assert f["--max-num-seqs"] == "200"  # 2 × 100, below 248 slots
    assert f["--max-num-batched-tokens"] == "2048"
    assert f["--gpu-memory-utilization"] == "0.9"
    assert "--enable-prefix-caching" in f
    assert f["--shutdown-timeout"] == "120"
    assert "--tensor-parallel-size" not in f
    assert tuned.command()[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    assert len(tuned.reasons()) >= len(tuned.flags)


def test_a100_gets_bf16_and_max_num_seqs_from_the_target() -> None:
    tuned = tune_vllm_args(ServingSpec(), "A100-80GB-PCIe")
    f = _flags(tuned.args)
    assert "--quantization" not in f and "--kv-cache-dtype" not in f
    assert f["--dtype"] == "bfloat16"
    assert f["--max-num-seqs"] == "200" and tuned.slots.slots < 200  # not capped at the slots
    assert any("8.0" in r for r in tuned.reasons())


def test_long_context_keeps_max_num_seqs_from_the_target() -> None:
    # 8B FP8 on an H100 at 131,072 tokens: 7 sequences of the full length fit, but vLLM admits by blocks held.
    tuned = tune_vllm_args(ServingSpec(max_model_len=131072, target_concurrency=100), "H100-SXM5-80GB")
    f = _flags(tuned.args)
    assert tuned.slots.slots == 7
    assert int(f["--max-num-seqs"] or 0) >= 150
    assert f["--max-model-len"] == "131072"
    assert not any(r.startswith("warning:") for r in tuned.reasons())  # no p95 context declared: a note
    assert any(r.startswith("note:") and "5,082 tokens" in r for r in tuned.reasons())


@pytest.mark.parametrize(("p95", "warned"), [(2048, False), (4096, False), (8192, True), (32768, True)])
def test_kv_warning_only_when_the_p95_context_does_not_fit_max_num_seqs(p95: int, warned: bool) -> None:
    # About 1.0M KV tokens: 200 sequences fit at 4,096 (819k tokens), not at 8,192 (1.6M).
    spec = ServingSpec(max_model_len=131072, target_concurrency=100, context_target=p95)
    reasons = tune_vllm_args(spec, "H100-SXM5-80GB").reasons()
    assert any(r.startswith("warning:") for r in reasons) is warned
    assert any(r.startswith("warning:") and "p95 context" in r for r in reasons) is warned


def test_context_target_above_max_model_len_is_refused() -> None:
    with pytest.raises(ValueError, match="context_target 8,192"):
        ServingSpec(max_model_len=4096, context_target=8192)


def test_fp8_requested_on_a100_is_an_error() -> None:
    with pytest.raises(Fp8Unsupported, match="H100"):
        tune_vllm_args(ServingSpec(weights_dtype="fp8"), "A100")


def test_tensor_parallel_only_when_the_machine_allows_it() -> None:
    spec = ServingSpec(model="meta-llama/Llama-3.3-70B-Instruct", max_model_len=8192, target_concurrency=50)
    assert _flags(tune_vllm_args(spec, "H100", gpu_count=2).args)["--tensor-parallel-size"] == "2"
    with pytest.raises(SizingError, match="gpu_count: 2"):
        tune_vllm_args(ServingSpec(model="meta-llama/Llama-3.3-70B-Instruct", weights_dtype="bf16"), "H100")


def test_small_model_on_a_multi_gpu_machine_is_not_split() -> None:
    tuned = tune_vllm_args(ServingSpec(), "H100", gpu_count=2)
    assert "--tensor-parallel-size" not in _flags(tuned.args)
    assert any("idle" in r for r in tuned.reasons())


def test_context_target_rounds_up_and_explicit_max_model_len_wins() -> None:
    assert _flags(tune_vllm_args(ServingSpec(context_target=3000), "H100").args)["--max-model-len"] == "3072"
    explicit = ServingSpec(context_target=3000, max_model_len=8192)
    assert _flags(tune_vllm_args(explicit, "H100").args)["--max-model-len"] == "8192"


def test_batched_tokens_at_least_max_num_seqs() -> None:
    tuned = tune_vllm_args(ServingSpec(target_concurrency=1500, max_model_len=1024), "B200")
    f = _flags(tuned.args)
    assert int(f["--max-num-batched-tokens"] or 0) >= int(f["--max-num-seqs"] or 0) > 2048


def test_extra_args_override_tuned_flags() -> None:
    tuned = tune_vllm_args(ServingSpec(extra_args=("--max-num-seqs", "64", "--swap-space=8")), "H100")
    assert tuned.args.count("--max-num-seqs") == 1
    assert tuned.args[-3:] == ("--max-num-seqs", "64", "--swap-space=8")
    assert any("set by extra_args" in r for r in tuned.reasons())


def test_short_names_are_served_by_their_hugging_face_id() -> None:
    assert tune_vllm_args(ServingSpec(model="qwen3-8b"), "H100").model == "Qwen/Qwen3-8B"


def test_gpt_oss_keeps_native_weights() -> None:
    f = _flags(tune_vllm_args(ServingSpec(model="openai/gpt-oss-20b"), "H100").args)
    assert "--quantization" not in f and "--dtype" not in f
    assert f["--kv-cache-dtype"] == "fp8"


def test_unknown_model_without_config_json() -> None:
    with pytest.raises(UnknownModel):
        tune_vllm_args(ServingSpec(model="acme/unknown-7b"), "H100")


def test_serving_spec_defaults_keep_old_yaml_valid() -> None:
    spec = ServingSpec.model_validate({"model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 4096})
    assert spec.gpu_memory_utilization == 0.90 and spec.weights_dtype is None and spec.extra_args == ()
    with pytest.raises(ValueError, match="list of arguments"):
        ServingSpec.model_validate({"extra_args": "--foo 1"})
