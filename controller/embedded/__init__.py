"""The embedded default: bundled example tiers and a synthetic load, so `scalectl daemon` shows the whole
loop on a fresh machine with no services."""

from __future__ import annotations

from importlib import resources


def bundled_tiers_text() -> str:
    return resources.files(__package__).joinpath("tiers.yaml").read_text(encoding="utf-8")
