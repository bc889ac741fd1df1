"""Container clouds: the ``vllm/vllm-openai`` image with arguments and environment.

The image's entrypoint is the OpenAI-compatible server (``vllm serve`` in current images, the
``vllm.entrypoints.openai.api_server`` module in older ones). Both accept ``--model NAME`` followed by
the engine flags, so the arguments start with ``--model`` rather than the positional form.
"""

from __future__ import annotations

from sizing.server import ServerDescription, secret_ref

CONTAINER_CACHE = "/root/.cache/huggingface"


def container_args(desc: ServerDescription) -> tuple[str, ...]:
    return ("--model", desc.model, *desc.args)


def container_env(desc: ServerDescription) -> dict[str, str]:
    env = {"HF_HOME": desc.cache_dir or CONTAINER_CACHE, **desc.env}
    for name in desc.secret_env:
        env[name] = secret_ref(name)  # the adapter resolves it at launch (sizing.server.resolve_secret_refs)
    return env
