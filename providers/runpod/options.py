"""Options of a ``type: runpod`` provider."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunPodOptions:
    cloud: str = "SECURE"  # SECURE, COMMUNITY or ALL
    default_image: str | None = None  # run when a launch carries no server description
    container_disk_gb: int = 80
    port_protocol: str = "tcp"  # tcp: direct public ip:port; http: RunPod's HTTPS proxy
    timeout: float = 30.0
    attempts: int = 4
    max_retry_after: float = 60.0

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RunPodOptions:
        known = set(cls.__dataclass_fields__)
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"runpod provider: unknown options {sorted(unknown)}; known: {sorted(known)}")
        made = cls(**dict(options))
        if made.cloud not in ("SECURE", "COMMUNITY", "ALL"):
            raise ValueError(f"runpod provider: options.cloud {made.cloud!r}: use SECURE, COMMUNITY or ALL")
        if made.port_protocol not in ("tcp", "http"):
            raise ValueError(f"runpod provider: options.port_protocol {made.port_protocol!r}: use tcp or http")
        if made.attempts < 1:
            raise ValueError("runpod provider: options.attempts must be at least 1")
        return made
