"""From a tier to its server description, and from the description to every bootstrap form at once."""

from __future__ import annotations

from controller.config import TierSpec
from providers.base import Bootstrap
from serving.bootstrap.cloud_init import render_user_data
from serving.bootstrap.container import container_args, container_env
from serving.bootstrap.ssh_script import render_ssh_script
from sizing.server import ServerDescription
from sizing.vllm_args import tune_vllm_args

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


def render_bootstrap(desc: ServerDescription) -> Bootstrap:
    """All three forms from one description; the adapter uses the one its cloud takes."""
    return Bootstrap(
        user_data=render_user_data(desc),
        image=desc.image,
        args=container_args(desc),
        env=container_env(desc),
        ports=(desc.port,),
        ssh_script=render_ssh_script(desc),
    )
