"""The composition root: settings in, a wired controller out. Nothing here runs at import time."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clocks import Clock
from controller.config import IMPLICIT_PROVIDERS, ConfigError, FleetConfig, load_config, parse_config
from controller.reconciler.loop import Reconciler
from controller.settings import Settings
from controller.signals.reading import SignalSource
from controller.store.db import make_engine
from controller.store.migrate import upgrade
from controller.store.repository import Store
from providers.base import Provider
from providers.registry import ProviderConfig, build_provider

log = logging.getLogger("scalectl")


def open_store(settings: Settings, *, migrate: bool = True) -> Store:
    engine = make_engine(settings.resolved_database_url())
    if migrate:
        upgrade(engine)
    return Store(engine)


def provider_configs(fleet: FleetConfig, settings: Settings) -> dict[str, ProviderConfig]:
    """Every provider the tiers name: configured blocks, plus the implicit ones (simulated, local)."""
    configs: dict[str, ProviderConfig] = {}
    for name, entry in fleet.providers.items():
        options: dict[str, Any] = dict(entry.options)
        if entry.type == "simulated":  # a simulated cloud outlives the daemon, like a real one
            options.setdefault("state_path", str(settings.data_dir / f"simulated-cloud-{name}.json"))
        configs[name] = ProviderConfig(
            name=name,
            type=entry.type,
            base_url=entry.base_url,
            api_key_env=entry.api_key_env,
            api_key_file=entry.api_key_file,
            options=options,
        )
    for tier in fleet.tiers.values():
        for name in tier.providers:
            if name not in configs and name in IMPLICIT_PROVIDERS:
                implicit: dict[str, Any] = {}
                if name == "simulated":
                    implicit["state_path"] = str(settings.data_dir / "simulated-cloud.json")
                elif name == "local":
                    implicit["state_dir"] = str(settings.data_dir / "local-instances")
                configs[name] = ProviderConfig(name=name, type=name, options=implicit)
    return configs


def build_providers(configs: dict[str, ProviderConfig], clock: Clock) -> dict[str, Provider]:
    return {name: build_provider(cfg, clock) for name, cfg in configs.items()}


def resolve_fleet(store: Store, config_file: Path | None, embedded_text: str | None) -> FleetConfig:
    """The configuration to run: a file (applied to the store first), else the stored one, else the
    bundled example (embedded default)."""
    if config_file is not None:
        fleet, _ = load_config(config_file)
        return fleet
    stored = store.fleet_config()
    if stored is not None:
        return stored
    if embedded_text is not None:
        return parse_config(embedded_text, "bundled example tiers")
    raise ConfigError("scalectl", ["no configuration: run `scalectl apply -f tiers.yaml` or pass --config"])


@dataclass
class Controller:
    """Everything a running daemon holds; ``aclose`` releases it all."""

    settings: Settings
    clock: Clock
    store: Store
    providers: dict[str, Provider]
    signals: SignalSource
    reconciler: Reconciler
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def fleet(self) -> FleetConfig:
        """The applied configuration: the store's one live view of it (re-read when a version lands)."""
        fleet = self.store.fleet_config()
        if fleet is None:
            raise RuntimeError("no configuration applied")  # the daemon applies one before it builds this
        return fleet

    async def aclose(self) -> None:
        await self.signals.aclose()
        for provider in self.providers.values():
            try:
                await provider.aclose()
            except Exception as exc:  # closing must not hide the others
                log.warning("closing provider %s: %s", getattr(provider, "name", "?"), exc)
        self.store.engine.dispose()
