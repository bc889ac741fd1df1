"""Which policy settings `scalectl tune` may search, and over what range: declared on the field itself.

A field opts in with ``Field(..., json_schema_extra=tunable(low, high))``; the search space of a policy kind
is every such field of its pydantic model (nested models included, as dotted names). A new setting becomes
tunable by declaring its range where it is defined — nothing else to edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TUNE_KEY = "tune"


@dataclass(frozen=True, slots=True)
class TuneRange:
    low: float
    high: float
    log: bool = False  # sample on a log scale (per-instance capacities, durations spanning decades)
    step: float | None = None  # grid step (None: continuous; integers always step by 1)


def tunable(low: float, high: float, *, log: bool = False, step: float | None = None) -> dict[str, Any]:
    """``json_schema_extra`` for a tunable field: the inclusive range the search draws from."""
    if not low < high:
        raise ValueError(f"a tunable range needs low < high, got [{low}, {high}]")
    entry: dict[str, Any] = {"low": low, "high": high, "log": log}
    if step is not None:
        entry["step"] = step
    return {TUNE_KEY: entry}


def tune_range(extra: Any) -> TuneRange | None:
    """The range declared on a field (its ``json_schema_extra``), or None for a field that is not tunable."""
    if not isinstance(extra, dict) or not isinstance(extra.get(TUNE_KEY), dict):
        return None
    entry = extra[TUNE_KEY]
    return TuneRange(float(entry["low"]), float(entry["high"]), bool(entry.get("log", False)), entry.get("step"))
