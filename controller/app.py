"""The composition root: settings in, a wired controller out. Nothing here runs at import time."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from scalectl.clocks import Clock
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.settings import Settings
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.migrate import upgrade
from scalectl.controller.store.repository import Store
from scalectl.providers.base import Provider
from scalectl.providers.registry import ProviderConfig, UnknownProviderType, build_provider, capabilities_of
from scalectl.sources.reading import SignalSource
from scalectl.tiers.config import IMPLICIT_PROVIDERS, FleetConfig

log = logging.getLogger("scalectl")


def open_store(settings: Settings, *, migrate: bool = True) -> Store:
    engine = make_engine(settings.resolved_database_url(), statement_timeout=settings.db_statement_timeout)
    if migrate:
        upgrade(engine)
    return Store(engine)


def provider_configs(fleet: FleetConfig, settings: Settings) -> dict[str, ProviderConfig]:
    """Every provider the tiers name: configured blocks, plus the implicit ones (simulated, local).

    An adapter that keeps state on this machine (its capabilities say where) gets it under the data dir."""
    configs: dict[str, ProviderConfig] = {}
    for name, entry in fleet.providers.items():
        options: dict[str, Any] = dict(entry.options)
        _default_state(options, entry.type, name, settings, implicit=False)
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
                _default_state(implicit, name, name, settings, implicit=True)  # implicit: named by their type
                configs[name] = ProviderConfig(name=name, type=name, options=implicit)
    return configs


def _default_state(options: dict[str, Any], type_name: str, name: str, settings: Settings, *, implicit: bool) -> None:
    try:
        state = capabilities_of(type_name).local_state
    except UnknownProviderType:
        return  # building the provider names the unknown type
    filename = state.default_for(name, implicit=implicit) if state is not None else None
    if state is not None and filename is not None:
        options.setdefault(state.option, str(settings.data_dir / filename))


def build_providers(configs: dict[str, ProviderConfig], clock: Clock) -> dict[str, Provider]:
    return {name: build_provider(cfg, clock) for name, cfg in configs.items()}


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
        fleet = self.store.config.fleet_config()
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
