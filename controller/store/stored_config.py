"""The stored configuration as tiers: parsing a stored version and the canonical JSON of a tier. No
SQLAlchemy here: `scalectl status` on SQLite parses the text it read with sqlite3 (status_reads)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the tiers-file models load lazily: only when a stored version is parsed
    from scalectl.tiers.config import FleetConfig, TierSpec


def parse_stored(text: str, version: int) -> FleetConfig:
    """One applied version's text, parsed and validated (ConfigError names the version)."""
    from scalectl.tiers.config import parse_config

    return parse_config(text, f"stored config v{version}")


def tier_spec_json(spec: TierSpec) -> dict[str, Any]:
    """The canonical stored form of a tier (also what `diff` compares)."""
    data: dict[str, Any] = json.loads(spec.model_dump_json(by_alias=True))
    return data
