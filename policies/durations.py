"""Human durations ("500ms", "30s", "5m", "1h30m") as float seconds, for configuration fields."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> float:
    """Return seconds for a duration like "5m" or a bare number of seconds; raise ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f'expected a duration like "5m", got {value!r}')
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"expected a non-negative duration, got {value!r}")
        return float(value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if text and _PART.sub("", text) == "" and _PART.search(text):
            return sum(float(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            if number >= 0:
                return number
    raise ValueError(f'expected a duration like "30s", "5m" or "500ms", got {value!r}')


def format_duration(seconds: float) -> str:
    """Render seconds compactly for reasons and YAML ("90s", "5m", "250ms")."""
    if seconds < 1 and seconds != 0:
        return f"{seconds * 1000:g}ms"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


Duration = Annotated[float, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)]
