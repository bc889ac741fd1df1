"""Small helpers every policy shares: instance counts from loads, and numbers written for people."""

from __future__ import annotations

import math

from scalectl.policies.durations import format_duration

# Float noise (6 × 1.3 = 7.800000000000001) must not buy an extra GPU.
_EPSILON_DIGITS = 9


def ceil_count(value: float) -> int:
    """Instances needed for a fractional load: ceil, robust to float noise, never negative."""
    if value <= 0:
        return 0
    return math.ceil(round(value, _EPSILON_DIGITS))


def num(value: float) -> str:
    """A load figure as people write it: 37, 2.5, 0.25."""
    return f"{value:g}"


def dur(seconds: float) -> str:
    """A duration for a reason: 31s, 5m, 4m59s, 26h32m2s (whole seconds from 10 s up, tenths below)."""
    seconds = round(seconds) if seconds >= 10 else round(seconds, 1)
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g}d"
    if seconds >= 60 and seconds % 60 != 0 and seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{int(minutes)}m{rest:g}s"
    if seconds >= 3600 and seconds % 3600 != 0:  # 26h32m2s, not 95522s
        hours, rest = divmod(int(seconds), 3600)
        minutes, secs = divmod(rest, 60)
        return f"{hours}h" + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return format_duration(round(seconds, 3))


def latency(seconds: float) -> str:
    """A latency for a reason: 620ms; from 10 s on, in seconds (a backlog's wait: 1016.8s, not 1.01676e+06ms)."""
    if seconds >= 10:
        return f"{seconds:.1f}s"
    return f"{seconds * 1000:g}ms"
