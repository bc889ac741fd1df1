"""Model catalogue: the architecture figures KV-cache and weight sizing need, and a config.json reader.

Figures come from each model's published Hugging Face ``config.json`` (instruct variants). Parameter counts
are the checkpoints' totals; ``tests/unit/sizing`` checks them against an estimate from the architecture.

Attention that only looks back a fixed window (gpt-oss alternates 128-token sliding-window layers with
full-attention layers) is counted the way vLLM's hybrid KV-cache manager allocates it: full-attention
layers grow with the context, sliding-window layers hold at most ``sliding_window`` tokens per sequence.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scalectl.sizing.errors import SizingError, UnknownModel

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str  # Hugging Face id
    num_layers: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    parameters: int  # total, all experts included
    max_context: int  # max_position_embeddings of the published config
    tie_word_embeddings: bool = False
    sliding_window: int | None = None
    sliding_layers: int = 0  # how many of num_layers use the sliding window
    moe: bool = False
    active_parameters: int | None = None  # per token, for MoE
    native_quantization: str | None = None  # "mxfp4" when the checkpoint ships pre-quantized weights
    native_weights_bytes: int | None = None  # size of those weights as loaded
    aliases: tuple[str, ...] = ()
    source: str = "catalogue"  # or the config.json path

    @property
    def full_attention_layers(self) -> int:
        return self.num_layers - self.sliding_layers

    @property
    def embedding_parameters(self) -> int:
        """Input embeddings plus the LM head (once when tied). vLLM keeps these in BF16 under FP8."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)


def estimate_dense_parameters(m: ModelInfo, *, qkv_bias: bool = False) -> int:
    """Parameter count of a Llama/Qwen-style dense decoder from its shape (norms included, rotary excluded)."""
    q = m.hidden_size * m.num_attention_heads * m.head_dim
    kv = 2 * m.hidden_size * m.num_kv_heads * m.head_dim
    o = m.num_attention_heads * m.head_dim * m.hidden_size
    bias = (m.num_attention_heads + 2 * m.num_kv_heads) * m.head_dim if qkv_bias else 0
    mlp = 3 * m.hidden_size * m.intermediate_size
    per_layer = q + kv + o + bias + mlp + 2 * m.hidden_size
    return m.num_layers * per_layer + m.embedding_parameters + m.hidden_size


_B = 1_000_000_000

MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo(
            "meta-llama/Llama-3.1-8B-Instruct", 32, 8, 128, 4096, 32, 14336, 128256, 8_030_261_248, 131072,
            aliases=("llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
        ),
        ModelInfo(
            "meta-llama/Llama-3.1-70B-Instruct", 80, 8, 128, 8192, 64, 28672, 128256, 70_553_706_496, 131072,
            aliases=("llama-3.1-70b", "meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B"),
        ),
        ModelInfo(
            "meta-llama/Llama-3.3-70B-Instruct", 80, 8, 128, 8192, 64, 28672, 128256, 70_553_706_496, 131072,
            aliases=("llama-3.3-70b",),
        ),
        ModelInfo(
            "Qwen/Qwen2.5-7B-Instruct", 28, 4, 128, 3584, 28, 18944, 152064, 7_615_616_512, 32768,
            aliases=("qwen2.5-7b",),
        ),
        ModelInfo(
            "Qwen/Qwen2.5-14B-Instruct", 48, 8, 128, 5120, 40, 13824, 152064, 14_770_033_664, 32768,
            aliases=("qwen2.5-14b",),
        ),
        ModelInfo(
            "Qwen/Qwen2.5-32B-Instruct", 64, 8, 128, 5120, 40, 27648, 152064, 32_763_876_352, 32768,
            aliases=("qwen2.5-32b",),
        ),
        ModelInfo(
            "Qwen/Qwen2.5-72B-Instruct", 80, 8, 128, 8192, 64, 29568, 152064, 72_706_203_648, 32768,
            aliases=("qwen2.5-72b",),
        ),
        ModelInfo("Qwen/Qwen3-8B", 36, 8, 128, 4096, 32, 12288, 151936, 8_190_735_360, 40960, aliases=("qwen3-8b",)),
        ModelInfo(
            "Qwen/Qwen3-14B", 40, 8, 128, 5120, 40, 17408, 151936, 14_768_307_200, 40960, aliases=("qwen3-14b",)
        ),
        ModelInfo(
            "Qwen/Qwen3-32B", 64, 8, 128, 5120, 64, 25600, 151936, 32_762_123_264, 40960, aliases=("qwen3-32b",)
        ),
        ModelInfo(
            "mistralai/Mistral-7B-Instruct-v0.3", 32, 8, 128, 4096, 32, 14336, 32768, 7_248_023_552, 32768,
            aliases=("mistral-7b", "mistral-7b-v0.3"),
        ),
        # MoE, MXFP4 expert weights; attention, router, embeddings stay BF16. 12.8 GiB / 60.8 GiB as loaded.
        ModelInfo(
            "openai/gpt-oss-20b", 24, 8, 64, 2880, 64, 2880, 201088, 20_900_000_000, 131072,
            sliding_window=128, sliding_layers=12, moe=True, active_parameters=3_600_000_000,
            native_quantization="mxfp4", native_weights_bytes=int(12.8 * GIB), aliases=("gpt-oss-20b",),
        ),
        ModelInfo(
            "openai/gpt-oss-120b", 36, 8, 64, 2880, 64, 2880, 201088, 116_800_000_000, 131072,
            sliding_window=128, sliding_layers=18, moe=True, active_parameters=5_100_000_000,
            native_quantization="mxfp4", native_weights_bytes=int(60.8 * GIB), aliases=("gpt-oss-120b",),
        ),
    )
}  # fmt: skip


def _squash(name: str) -> str:
    base = name.strip().lower().rsplit("/", 1)[-1]
    base = re.sub(r"^meta-", "", base)
    base = re.sub(r"-(instruct|chat|it)$", "", base)
    return re.sub(r"[^a-z0-9.]", "", base)


_BY_SQUASHED: dict[str, str] = {}
for _m in MODELS.values():
    for _alias in (_m.name, *_m.aliases):
        _BY_SQUASHED.setdefault(_squash(_alias), _m.name)


def lookup_model(name: str) -> ModelInfo:
    """Catalogue entry by Hugging Face id or short name ("llama-3.1-8b"); UnknownModel says how to add one."""
    found = _BY_SQUASHED.get(_squash(name))
    if found is None:
        raise UnknownModel(
            f"unknown model {name!r}{_suggestion(name)}: not in the catalogue and no config.json was given; pass "
            f"the model's Hugging Face config.json (--config-json PATH, or serving.config_json in tiers.yaml), "
            f"or use one of: {', '.join(MODELS)}"
        )
    return MODELS[found]


def _suggestion(name: str) -> str:
    from scalectl.sizing.gpus import did_you_mean

    hint = did_you_mean(name, [*MODELS, *(a for m in MODELS.values() for a in m.aliases)])
    return f" ({hint.strip()})" if hint else ""


def _text_config(data: dict[str, Any]) -> dict[str, Any]:
    nested = data.get("text_config")
    return {**data, **nested} if isinstance(nested, dict) else data


def _require_int(data: dict[str, Any], key: str, path: Path) -> int:
    value = data.get(key)
    if not isinstance(value, int) or value <= 0:
        raise SizingError(f"{path}: `{key}` must be a positive integer, got {value!r}")
    return value


def _safetensors_total_bytes(config_path: Path) -> int | None:
    index = config_path.with_name("model.safetensors.index.json")
    try:
        total = json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return int(total) if isinstance(total, int | float) and total > 0 else None


def model_from_config_json(path: str | Path, name: str | None = None) -> ModelInfo:
    """Read the architecture from a Hugging Face ``config.json`` (and its safetensors index when next to it)."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SizingError(f"{p}: cannot read the model config: {exc.strerror}") from None
    except ValueError as exc:
        raise SizingError(f"{p}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise SizingError(f"{p}: expected a JSON object (a Hugging Face config.json)")
    data = _text_config(raw)
    layers = _require_int(data, "num_hidden_layers", p)
    hidden = _require_int(data, "hidden_size", p)
    heads = _require_int(data, "num_attention_heads", p)
    kv_heads = data.get("num_key_value_heads") or heads
    head_dim = data.get("head_dim") or hidden // heads
    vocab = _require_int(data, "vocab_size", p)
    max_context = data.get("max_position_embeddings") or 0
    layer_types = data.get("layer_types") or []
    sliding_layers = sum(1 for t in layer_types if t == "sliding_attention")
    window = data.get("sliding_window")
    if data.get("use_sliding_window") is False or not sliding_layers:
        # Qwen2 configs carry sliding_window but disable it; Mistral v0.1 applies it to every layer.
        sliding_layers = layers if (window and data.get("use_sliding_window") is not False and not layer_types) else 0
    moe = any(k in data for k in ("num_local_experts", "num_experts", "n_routed_experts"))
    quant = data.get("quantization_config") or {}
    native_quant = quant.get("quant_method") if isinstance(quant, dict) else None
    info = ModelInfo(
        name=name or str(data.get("_name_or_path") or p.parent.name),
        num_layers=layers,
        num_kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=int(data.get("intermediate_size") or 0),
        vocab_size=vocab,
        parameters=0,
        max_context=int(max_context),
        tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
        sliding_window=int(window) if window and sliding_layers else None,
        sliding_layers=sliding_layers,
        moe=moe,
        native_quantization=str(native_quant) if native_quant else None,
        source=str(p),
    )
    total_bytes = _safetensors_total_bytes(p)
    if native_quant and total_bytes:
        return replace(info, native_weights_bytes=total_bytes)
    if total_bytes:  # BF16/FP16 checkpoints: 2 bytes per parameter
        return replace(info, parameters=total_bytes // 2)
    if moe or native_quant:
        raise SizingError(
            f"{p}: cannot size the weights of a mixture-of-experts or pre-quantized model from config.json alone; "
            f"put its model.safetensors.index.json next to it, or give the weights size (--weights-gib)"
        )
    return replace(info, parameters=estimate_dense_parameters(info, qkv_bias=data.get("model_type") == "qwen2"))


def resolve_model(name: str, config_json: str | Path | None = None) -> ModelInfo:
    """The model to size: from ``config_json`` when given, else from the catalogue."""
    if config_json:
        return model_from_config_json(config_json, name=name)
    return lookup_model(name)
