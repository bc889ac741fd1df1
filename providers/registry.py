"""The explicit registry of provider adapters, by type name. Imports are lazy (boto3 is an extra)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scalectl.clocks import Clock
from scalectl.providers.base import Provider, ProviderCapabilities

# type name -> "module:Class". The class takes (config: ProviderConfig, clock: Clock).
ADAPTERS: dict[str, str] = {
    "simulated": "scalectl.providers.simulated:SimulatedCloud",
    "simulated-remote": "scalectl.providers.simulated.remote:RemoteSimulatedCloud",
    "local": "scalectl.providers.local:LocalProvider",
    "spheron": "scalectl.providers.spheron:SpheronProvider",
    "lambda": "scalectl.providers.lambda_cloud:LambdaProvider",
    "runpod": "scalectl.providers.runpod:RunPodProvider",
    "vastai": "scalectl.providers.vastai:VastAIProvider",
    "aws": "scalectl.providers.aws:AwsEc2Provider",
}


@dataclass(frozen=True)
class ProviderConfig:
    """One configured provider account. ``name`` is what tiers list; ``type`` picks the adapter."""

    name: str
    type: str
    base_url: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


# type name -> "module:function" that checks a provider's ``options`` when the configuration is loaded
# (raises ValueError saying what to fix), so a missing option fails `scalectl apply`, not the first create.
OPTION_CHECKS: dict[str, str] = {
    "spheron": "scalectl.providers.spheron:check_options",
}


class UnknownProviderType(ValueError):
    pass


def check_options(provider_type: str, options: Mapping[str, Any]) -> None:
    target = OPTION_CHECKS.get(provider_type)
    if target is None:
        return
    module_name, _, function_name = target.partition(":")
    getattr(importlib.import_module(module_name), function_name)(options)


def adapter_class(type_name: str, *, provider: str | None = None) -> type[Provider]:
    """The adapter class registered for ``type_name`` (imported on first use)."""
    target = ADAPTERS.get(type_name)
    if target is None:
        known = ", ".join(sorted(ADAPTERS))
        named = f"provider {provider!r}: " if provider else ""
        raise UnknownProviderType(f"{named}unknown type {type_name!r}; known: {known}")
    module_name, _, class_name = target.partition(":")
    cls: type[Provider] = getattr(importlib.import_module(module_name), class_name)
    return cls


def capabilities_of(type_name: str) -> ProviderCapabilities:
    """What an adapter type declares, without building one (no credentials needed)."""
    return adapter_class(type_name).capabilities


def build_provider(config: ProviderConfig, clock: Clock) -> Provider:
    cls: Any = adapter_class(config.type, provider=config.name)
    provider: Provider = cls(config, clock)
    return provider
