"""Options of a ``type: vastai`` provider."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class VastOptions:
    default_image: str | None = None  # run when a launch carries no server description
    disk_gb: int = 80
    min_reliability: float = 0.95
    verified_only: bool = True
    max_offers: int = 20  # per search; Vast returns at most 64
    timeout: float = 30.0
    attempts: int = 4
    max_retry_after: float = 60.0
    rate_limit_wait: float = 2.0  # Vast's 429 carries no Retry-After; this is what RateLimited reports

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> VastOptions:
        known = set(cls.__dataclass_fields__)
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"vastai provider: unknown options {sorted(unknown)}; known: {sorted(known)}")
        made = cls(**dict(options))
        if not 1 <= made.max_offers <= 64:
            raise ValueError("vastai provider: options.max_offers must be between 1 and 64")
        if made.attempts < 1:
            raise ValueError("vastai provider: options.attempts must be at least 1")
        return made
