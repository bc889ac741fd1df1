"""Daemon settings: environment variables with the SCALECTL_ prefix (and DATABASE_URL), one typed object."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    """$XDG_DATA_HOME/scalectl, else ~/.local/share/scalectl (the embedded default's home)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "scalectl"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SCALECTL_", extra="ignore")

    database_url: str | None = Field(
        None,
        validation_alias=AliasChoices("SCALECTL_DATABASE_URL", "DATABASE_URL"),
        description="SQLAlchemy URL; default: SQLite file in data_dir",
    )
    data_dir: Path = Field(default_factory=default_data_dir)
    cluster: str = Field("sc", pattern=r"^[a-z0-9]{1,12}$", description="Key prefix that marks our instances")
    tick_interval: float = Field(5.0, gt=0, description="Seconds between reconcile ticks")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Daemon log level")
    log_format: Literal["text", "json"] = Field("text", description="Daemon log lines: text or JSON (one object each)")
    http_host: str = "127.0.0.1"
    http_port: int = Field(8089, ge=0, le=65535)
    config_file: Path | None = Field(None, description="tiers.yaml applied at start (else the stored config)")
    retention_days: float = Field(14.0, gt=0)
    offers_ttl: float = Field(60.0, ge=0, description="Seconds provider offers are cached")
    offer_unavailable_for: float = Field(
        180.0, ge=0, description="Seconds an offer is skipped after a no-capacity answer (Karpenter: 3 min)"
    )
    max_concurrent_provider_calls: int = Field(32, ge=1)
    leader_lease_ttl: float = Field(
        10.0,
        ge=1.0,
        le=300.0,
        description="Seconds a leader's lease lasts without renewal; a standby takes over after it (HA)",
    )
    webhook_secret_env: str = "SCALECTL_WEBHOOK_SECRET"
    webhook_secret_file: Path | None = None
    eventbridge_token_env: str = "SCALECTL_EVENTBRIDGE_TOKEN"
    eventbridge_token_file: Path | None = None
    # Serving path (docs/operations.md): where ready instances are routed.
    routing: Literal["none", "nginx"] = Field("none", description="Load balancer kept in step with ready instances")
    routing_conf_dir: Path = Field(Path("/etc/nginx/scalectl"), description="nginx: one scalectl-<tier>.conf each")
    routing_main_conf: Path | None = Field(None, description="nginx: the nginx.conf to test and reload (-c)")
    routing_prefix: Path | None = Field(None, description="nginx: prefix directory (-p) for a private nginx")
    routing_nginx_bin: str = "nginx"
    routing_reload_command: list[str] | None = Field(None, description='e.g. ["systemctl", "reload", "nginx"]')
    routing_test_command: list[str] | None = Field(None, description="default: nginx [-p] [-c] -t -q")
    routing_listen: dict[str, str] = Field(
        default_factory=dict, description='tier -> listen address for a generated server block, e.g. {"chat": "8080"}'
    )

    activator_addresses: list[str] | None = Field(
        None,
        description="host:port where nginx reaches each replica's activator; default: this daemon's HTTP address",
    )

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{self.data_dir / 'scalectl.db'}"

    def activator_upstreams(self) -> tuple[str, ...]:
        """Where the load balancer sends an empty tier's requests: the configured replicas, else this daemon
        (a wildcard listen address is reached on loopback)."""
        if self.activator_addresses:
            return tuple(self.activator_addresses)
        host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(self.http_host, self.http_host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return (f"{host}:{self.http_port}",)

    @property
    def key_prefix(self) -> str:
        return f"{self.cluster}-"
