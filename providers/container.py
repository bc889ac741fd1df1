"""What the container clouds (RunPod, Vast.ai) share: the image a launch runs, and the environment markers
that tell our instances (key, capacity, tier) from look-alikes when the cloud lists them back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scalectl.providers.base import Capacity, LaunchSpec
from scalectl.providers.errors import InvalidRequest
from scalectl.providers.tagging import validate_key
from scalectl.serving.bootstrap.container import ContainerLaunch

KEY_ENV = "SCALECTL_KEY"
CAPACITY_ENV = "SCALECTL_CAPACITY"
TIER_ENV = "SCALECTL_TIER"


def image_for(launch: ContainerLaunch, default: str | None, *, provider: str, cloud: str) -> str:
    """The launch's image, else the provider block's ``default_image``; a launch with neither is refused."""
    if launch.image:
        return launch.image
    if default:
        return default
    raise InvalidRequest(
        f"{cloud} needs a container image: launch a server description (the tier's serving.image), "
        "or set options.default_image in the provider block",
        provider=provider,
    )


def marked_env(spec: LaunchSpec, launch: ContainerLaunch) -> dict[str, str]:
    """The server's environment plus our markers."""
    env = dict(launch.env)
    env.update({KEY_ENV: spec.key, CAPACITY_ENV: spec.capacity.value, TIER_ENV: spec.tier})
    return env


def capacity_of(marker: Any, is_spot: Any) -> Capacity | None:
    """Our capacity marker when it reads; else the cloud's own spot flag; else unknown."""
    if isinstance(marker, str):
        try:
            return Capacity(marker)
        except ValueError:
            return None
    if isinstance(is_spot, bool):
        return Capacity.SPOT if is_spot else Capacity.ON_DEMAND
    return None


def is_key(name: str) -> bool:
    try:
        validate_key(name)
    except ValueError:
        return False
    return True


def key_if_marked(name: Any, env: Mapping[str, Any] | None) -> str | None:
    """Ours: a valid key as the name, and (when the cloud shows the env) our key marker agrees with it."""
    if not isinstance(name, str) or not name or not is_key(name):
        return None
    if env is not None and env.get(KEY_ENV) != name:
        return None
    return name
