"""From a tier to its server description; each provider adapter renders the description in its own form."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from scalectl.sizing.server import ServerDescription
from scalectl.sizing.vllm_args import tune_vllm_args
from scalectl.tiers.config import TierSpec

STOP_MARGIN = 30  # seconds systemd waits beyond vLLM's own drain


def describe_tier_server(tier: TierSpec) -> ServerDescription:
    """The tier's server: tuned vLLM arguments, its image, port, cache and secret names."""
    serving = tier.serving
    tuned = tune_vllm_args(serving, tier.gpu, tier.gpu_count, drain_timeout=tier.drain_timeout)
    return ServerDescription(
        model=tuned.model,
        args=tuned.args,
        port=serving.port,
        image=serving.image,
        env={"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"},
        secret_env=(serving.hf_token_env,) if serving.hf_token_env else (),
        cache_dir=serving.model_cache_dir,
        stop_timeout=int(tier.drain_timeout) + STOP_MARGIN,
    )


def server_hash(tier: TierSpec, generation: int = 0) -> str:
    """What an instance of the tier runs, as 16 hex digits: the server description (model, image, vLLM
    arguments, environment, cache, secret names), the GPU it is sized for and the rollout generation
    (`scalectl rollout restart` bumps it). An instance launched with another hash has drifted."""
    doc = {"server": asdict(describe_tier_server(tier)), "gpu": [tier.gpu, tier.gpu_count], "generation": generation}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]
