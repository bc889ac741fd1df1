"""Reading values out of a provider's JSON without trusting its types: a wrong type reads as missing."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_number(value: Any) -> float | None:
    """A number, or a string holding one; booleans and anything else are missing."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def positive(value: Any) -> float | None:
    number = as_number(value)
    return number if number is not None and number > 0 else None


def iso_timestamp(value: Any) -> float | None:
    """Seconds since the epoch from an ISO-8601 text (``Z`` accepted); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
