"""Options of a ``type: spheron`` provider, checked when the tiers file is loaded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

DEFAULT_BASE_URL = "https://app.spheron.ai"
DEFAULT_PAGE_SIZE = 100
DEFAULT_MAX_PAGES = 1000


@dataclass(frozen=True, slots=True)
class SpheronOptions:
    team_id: str | None = None  # the billed team; required (see check_options)
    ssh_key_id: str | None = None  # a key registered in the Spheron dashboard (required on create)
    operating_system: str | None = None  # must be one of an offer's os_options; offers without it are skipped
    provider: str | None = None  # only offers from this upstream provider (e.g. "voltage-park")
    require_cloud_init: bool = True  # skip offers that cannot run our cloud-init bootstrap
    server_port: int = 8000
    timeout: float = 30.0
    max_attempts: int = 4
    max_wait: float = 30.0
    page_size: int = DEFAULT_PAGE_SIZE  # rows asked per page (offers and deployments); the server may send fewer
    max_pages: int = DEFAULT_MAX_PAGES  # a bound on one listing; reaching it raises ListingIncomplete, never truncates
    # Spheron's API reference ("Rate limits"): about 100-250 requests per 15 minutes per IP, and 10
    # deployment creates per 15 minutes per user. We keep to the low end unless told otherwise.
    requests_per_15min: int = 100
    creates_per_15min: int = 10

    _ALIASES = {"teamId": "team_id", "sshKeyId": "ssh_key_id", "operatingSystem": "operating_system"}

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> SpheronOptions:
        values = {cls._ALIASES.get(k, k): v for k, v in options.items()}
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown options {sorted(unknown)}; known: {sorted(known)}")
        if not str(values.get("team_id") or "").strip():
            raise ValueError(MISSING_TEAM)
        return cls(**values)


MISSING_TEAM = (
    "options.team_id is required: every Spheron deployment is billed to a team. Set it to your team id "
    "(dashboard: Settings -> Team; or the teamId of the current team in GET /api/balance)"
)


def check_options(options: Mapping[str, Any]) -> None:
    """Configuration-time check of a ``type: spheron`` provider's options; ValueError says what to fix."""
    SpheronOptions.from_mapping(options)
