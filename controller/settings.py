"""Daemon settings: environment variables with the SCALECTL_ prefix (and DATABASE_URL), one typed object.

Each field ``name`` is read from ``SCALECTL_<NAME>`` unless given as an argument; lists and maps are JSON
(``SCALECTL_ROUTING_LISTEN='{"chat": "8080"}'``). A plain pydantic model reads them, not pydantic-settings:
every `scalectl` command builds these settings, and that library's import cost more than the rest of
`scalectl status` together.
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ENV_PREFIX = "SCALECTL_"


def default_data_dir() -> Path:
    """$XDG_DATA_HOME/scalectl, else ~/.local/share/scalectl (the embedded default's home)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "scalectl"


def _is_json(annotation: Any) -> bool:
    """Lists and maps (possibly optional) come from the environment as JSON."""
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return True
    return any(_is_json(arg) for arg in typing.get_args(annotation)) if origin is not None else False


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore")

    database_url: str | None = Field(None, description="SQLAlchemy URL; default: SQLite file in data_dir")
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
    provider_call_deadline: float | None = Field(
        None,
        gt=0,
        description="Seconds a provider call may take before it is cut and its tiers hold (the tick goes on); "
        "default: the tick interval, at least 5 s",
    )
    db_statement_timeout: float = Field(
        30.0, gt=0, description="PostgreSQL: seconds a statement may run before the server cancels it"
    )
    leader_lease_ttl: float = Field(
        10.0,
        ge=1.0,
        le=300.0,
        description="Seconds a leader's lease lasts without renewal; a standby takes over after it (HA)",
    )
    shard_tiers: bool = Field(
        False,
        description="Daemons on one PostgreSQL database split the tiers (a lease per tier) instead of one "
        "leading and the others standing by; every daemon must set the same value",
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

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, data: Any) -> Any:
        """Fields not given as arguments come from ``SCALECTL_<NAME>`` (the database URL also from
        ``DATABASE_URL``); a list or map that is not JSON is an error naming the variable."""
        given = dict(data) if isinstance(data, dict) else {}
        for name, field in cls.model_fields.items():
            if name in given:
                continue
            var = ENV_PREFIX + name.upper()
            value = os.environ.get(var)
            if value is None and name == "database_url":
                var, value = "DATABASE_URL", os.environ.get("DATABASE_URL")
            if value is None:
                continue
            if _is_json(field.annotation):
                try:
                    given[name] = json.loads(value)
                except ValueError:
                    raise ValueError(f"{var}: expected JSON (a list or a map), got {value!r}") from None
            else:
                given[name] = value
        return given

    @model_validator(mode="after")
    def _sharding_routes_nothing(self) -> Settings:
        if self.shard_tiers and self.routing != "none":
            raise ValueError(
                "SCALECTL_SHARD_TIERS=true needs SCALECTL_ROUTING=none: a daemon that acts on some tiers only "
                "would route (and hold requests for) only those; run the routing daemons unsharded"
            )
        return self

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
