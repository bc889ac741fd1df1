"""The last word: tier min/max and the $/hour budget (policies/clamp.py, the rule every policy ends with)."""

from __future__ import annotations

from scalectl.policies.clamp import clamp
from scalectl.policies.types import Bounds


def guard(desired: int, bounds: Bounds) -> tuple[int, str]:
    """The count within the limits, and what the limits changed ("" when nothing)."""
    value, notes = clamp(desired, bounds)
    return value, "; ".join(notes)
