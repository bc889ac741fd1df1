from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalectl.sizing.errors import SizingError, UnknownModel
from scalectl.sizing.models import (
    MODELS,
    estimate_dense_parameters,
    lookup_model,
    model_from_config_json,
    resolve_model,
)


@pytest.mark.parametrize("model", [m for m in MODELS.values() if not m.moe], ids=lambda m: m.name)
def test_catalogue_parameters_match_the_architecture(model) -> None:
    """Each dense entry's parameter count is what its layer shapes add up to (within Qwen3's q/k norms)."""
    estimate = estimate_dense_parameters(model, qkv_bias=model.name.startswith("Qwen/Qwen2.5"))
    assert abs(estimate - model.parameters) / model.parameters < 1e-5


def test_head_dim_times_heads_is_hidden_for_llama_and_qwen25() -> None:
    for name in ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-72b", "mistral-7b"):
        m = lookup_model(name)
        assert m.head_dim * m.num_attention_heads == m.hidden_size


@pytest.mark.parametrize(
    "spelling",
    ["meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B-Instruct", "LLAMA-3.1-8B"],
)
def test_lookup_accepts_common_spellings(spelling: str) -> None:
    assert lookup_model(spelling).name == "meta-llama/Llama-3.1-8B-Instruct"


def test_unknown_model_says_how_to_fix_it() -> None:
    with pytest.raises(UnknownModel) as err:
        lookup_model("acme/secret-model-13b")
    assert "config.json" in str(err.value) and "Qwen/Qwen3-8B" in str(err.value)


def _write(tmp_path: Path, data: dict, index_total: int | None = None) -> Path:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(data))
    if index_total is not None:
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": index_total}}))
    return p


LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}


def test_config_json_matches_the_catalogue(tmp_path: Path) -> None:
    m = model_from_config_json(_write(tmp_path, LLAMA_CONFIG), name="my/llama")
    ref = lookup_model("llama-3.1-8b")
    assert (m.num_layers, m.num_kv_heads, m.head_dim, m.max_context) == (32, 8, 128, 131072)
    assert m.parameters == ref.parameters  # estimated from the shapes
    assert m.name == "my/llama"


def test_config_json_prefers_the_safetensors_index(tmp_path: Path) -> None:
    m = model_from_config_json(_write(tmp_path, LLAMA_CONFIG, index_total=16_000_000_000))
    assert m.parameters == 8_000_000_000


def test_config_json_reads_layer_types_and_nested_text_config(tmp_path: Path) -> None:
    data = {
        "text_config": {
            **LLAMA_CONFIG,
            "num_hidden_layers": 4,
            "sliding_window": 128,
            "layer_types": ["sliding_attention", "full_attention"] * 2,
            "head_dim": 64,
            "quantization_config": {"quant_method": "mxfp4"},
        }
    }
    m = model_from_config_json(_write(tmp_path, data, index_total=1_000_000))
    assert (m.sliding_layers, m.sliding_window, m.head_dim) == (2, 128, 64)
    assert m.native_weights_bytes == 1_000_000


def test_qwen2_disabled_sliding_window_is_ignored(tmp_path: Path) -> None:
    data = {**LLAMA_CONFIG, "model_type": "qwen2", "sliding_window": 131072, "use_sliding_window": False}
    assert model_from_config_json(_write(tmp_path, data)).sliding_layers == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({**LLAMA_CONFIG, "num_hidden_layers": "many"}, "num_hidden_layers"),
        ({**LLAMA_CONFIG, "num_local_experts": 8}, "mixture-of-experts"),
    ],
)
def test_bad_config_json(tmp_path: Path, data: dict, message: str) -> None:
    with pytest.raises(SizingError, match=message):
        model_from_config_json(_write(tmp_path, data))


def test_missing_config_json_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(SizingError, match="cannot read"):
        resolve_model("x", tmp_path / "nope.json")
