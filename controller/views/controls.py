"""The operator's controls on the tiers (`scalectl scale`, `scalectl pause`) as status and describe show them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scalectl.domain.tier_control import TierControl, clock_time


def control_view(control: TierControl | None, now: float) -> dict[str, Any] | None:
    """One tier's controls at ``now`` (world time); None when nothing holds it (an expired override shows
    as expired until it is cleared or replaced, so the operator sees it ended)."""
    if control is None or (control.override is None and not control.paused):
        return None
    override: dict[str, Any] | None = None
    if control.override is not None:
        active = control.override_at(now) is not None
        until = None if control.override_until is None else clock_time(control.override_until)
        override = {"count": control.override, "until": until or "cleared", "active": active}
    return {"override": override, "paused": control.paused, "summary": control.describe(now) or "override expired"}


def with_controls(document: dict[str, Any], controls: Mapping[str, TierControl], now: float) -> dict[str, Any]:
    """A status document (``status_document``) with each tier row's ``control`` (None: nothing holds it):
    `scalectl status -o json` and the daemon's /v1/status add it alike."""
    for row in document["tiers"]:
        row["control"] = control_view(controls.get(row["tier"]), now)
    return document


def sqlite_controls(conn: Any) -> dict[str, TierControl]:
    """``ControlStore.controls`` through a plain sqlite3 connection (`scalectl status`'s fast path)."""
    query = "SELECT tier, override_count, override_until, paused FROM tier_controls"
    return {tier: TierControl(count, until, bool(paused)) for tier, count, until, paused in conn.execute(query)}
