"""What a tier serves (the ``serving:`` block): the model, the traffic it is sized for, and how vLLM runs.

Every field has a default, so a tier with no ``serving:`` block gets Llama 3.1 8B at 4,096 tokens for 100
concurrent sessions, with dtypes chosen for its GPU (see docs/sizing.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_IMAGE = "vllm/vllm-openai:v0.17.1"


class ServingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    max_model_len: int = Field(4096, gt=0)  # the context target: p95 context of the traffic, not the model maximum
    target_concurrency: int = Field(100, gt=0)
    session_affinity: bool = False  # multi-turn tiers: route a session to the same instance
    # Set when only the traffic's p95 context is known: max-model-len becomes it rounded up to 1,024 tokens
    # (an explicit max_model_len wins).
    context_target: int | None = Field(None, gt=0)
    # None: choose for the GPU (fp8 where supported, the checkpoint's own format for pre-quantized models).
    weights_dtype: Literal["fp8", "bf16", "fp16", "native"] | None = None
    kv_cache_dtype: Literal["fp8", "auto"] | None = None  # None: fp8 where supported, else auto (BF16)
    gpu_memory_utilization: float = Field(0.90, gt=0.3, le=0.98)
    max_num_batched_tokens: int | None = Field(None, gt=0)  # None: 2,048 (chunked prefill)
    enable_prefix_caching: bool = True
    graceful_shutdown: bool = True  # pass --shutdown-timeout (needs a vLLM that has it)
    runtime_overhead_gib: float = Field(1.5, ge=0)  # activations, CUDA graphs, non-torch memory
    config_json: str | None = None  # local Hugging Face config.json for models the catalogue lacks
    extra_args: tuple[str, ...] = ()  # appended last; they override the tuned flags they repeat
    image: str = DEFAULT_IMAGE
    port: int = Field(8000, gt=0, lt=65536)
    hf_token_env: str | None = "HF_TOKEN"  # name of the env var holding the token, never the token
    model_cache_dir: str | None = None  # None: a spare local NVMe when present, else /var/cache/scalectl/models

    @field_validator("extra_args", mode="before")
    @classmethod
    def _args_are_strings(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError('expected a list of arguments like ["--swap-space", "8"], got a string')
        return value

    @model_validator(mode="after")
    def _context_target_fits(self) -> ServingSpec:
        # vLLM refuses (HTTP 400) every request over max-model-len: a p95 above it refuses over 5% of traffic.
        if (
            "max_model_len" in self.model_fields_set
            and self.context_target
            and self.context_target > self.max_model_len
        ):
            raise ValueError(
                f"context_target {self.context_target:,} (the p95 context) is above max_model_len "
                f"{self.max_model_len:,}: vLLM would refuse every request longer than max_model_len (HTTP 400); "
                "raise max_model_len to at least context_target, or leave it unset to derive it from context_target"
            )
        return self

    @property
    def effective_max_model_len(self) -> int:
        if "max_model_len" not in self.model_fields_set and self.context_target:
            return -(-self.context_target // 1024) * 1024
        return self.max_model_len
