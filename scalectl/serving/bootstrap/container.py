"""Container clouds: the ``vllm/vllm-openai`` image with arguments and environment.

The image's entrypoint is the OpenAI-compatible server (``vllm serve`` in current images, the
``vllm.entrypoints.openai.api_server`` module in older ones). Both accept ``--model NAME`` followed by
the engine flags, so the arguments start with ``--model`` rather than the positional form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scalectl.sizing.server import ServerDescription, secret_ref

CONTAINER_CACHE = "/root/.cache/huggingface"
DEFAULT_PORTS = (8000,)


@dataclass(frozen=True, slots=True)
class ContainerLaunch:
    """What a container cloud runs: an image, its arguments and environment, the ports it exposes."""

    image: str | None = None  # None: the adapter's configured default image
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # secrets as ${secret:NAME} references
    ports: tuple[int, ...] = DEFAULT_PORTS


def container_args(desc: ServerDescription) -> tuple[str, ...]:
    return ("--model", desc.model, *desc.args)


def container_env(desc: ServerDescription) -> dict[str, str]:
    env = {"HF_HOME": desc.cache_dir or CONTAINER_CACHE, **desc.env}
    for name in desc.secret_env:
        env[name] = secret_ref(name)  # the adapter resolves it at launch (sizing.server.resolve_secret_refs)
    return env


def container_launch(desc: ServerDescription | None) -> ContainerLaunch:
    """The container form of a server description; no description: the adapter's default image, bare."""
    if desc is None:
        return ContainerLaunch()
    return ContainerLaunch(image=desc.image, args=container_args(desc), env=container_env(desc), ports=(desc.port,))
