"""Status mapping in one place: every adapter gives a table; anything not in it is UNKNOWN."""

from __future__ import annotations

from collections.abc import Mapping

from scalectl.providers.base import InstanceStatus


def map_status(raw: str | None, table: Mapping[str, InstanceStatus]) -> InstanceStatus:
    """Look ``raw`` up case-insensitively; unexpected or missing statuses are UNKNOWN, never a guess."""
    if not raw:
        return InstanceStatus.UNKNOWN
    return table.get(raw.strip().lower(), InstanceStatus.UNKNOWN)
