"""Ages as the read models show them."""

from __future__ import annotations


def ago(seconds: float) -> str:
    """A short age ("45s", "12m", "3.5h"). Rows written by an earlier, faster demo can lie ahead of a later
    daemon's clock: never a negative age."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
