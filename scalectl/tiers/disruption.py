"""Disruption budgets: how many instances may be draining by our choice at once (scale-in, rollouts).

``max_disrupted`` is the tier's budget at all times; ``disruption_windows`` override it while they are open
(Karpenter's scheduled budgets): a window opens at each firing of its ``cron`` in its timezone and stays open
for ``duration``. When several are open the most restrictive wins, and ``max_disrupted: 0`` in a window
means no voluntary disruption at all (e.g. no rollout or scale-in during business hours). Interruptions are
never voluntary and are never held back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from scalectl.policies.durations import Duration, format_duration
from scalectl.policies.spec import cron_expression, iana_timezone

Budget = int | float  # a count, or a fraction of the counted instances


def parse_budget(value: Any, *, allow_zero: bool) -> Budget:
    """A count (≥ 1, or ≥ 0 where ``allow_zero``) or a percentage string like "25%" (as a fraction)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            share = float(value.strip()[:-1]) / 100.0
        except ValueError:
            share = -1.0
        low_ok = share >= 0 if allow_zero else share > 0
        if not (low_ok and share <= 1):
            floor = "0%" if allow_zero else "above 0%"
            raise ValueError(f"{value!r}: a percentage must be {floor} and at most 100%")
        return share
    least = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f'{value!r}: give a count of at least {least}, or a percentage like "25%"')
    return value


def budget_count(budget: Budget, counted: int) -> int:
    """Instances the budget lets drain at once: a count as given (0 blocks), or a fraction of the fleet
    rounded down and at least one (a non-zero share never blocks a small fleet for good)."""
    if isinstance(budget, float):
        return 0 if budget == 0 else max(1, math.floor(budget * counted))
    return budget


class DisruptionWindow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str  # when the window opens, e.g. "0 9 * * mon-fri"
    duration: Duration = Field(gt=0)
    timezone: str = "UTC"
    max_disrupted: int | float = 0  # while open; 0: no voluntary disruption

    _cron_parses = field_validator("cron")(cron_expression)
    _timezone_exists = field_validator("timezone")(iana_timezone)

    @field_validator("max_disrupted", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        return parse_budget(value, allow_zero=True)

    def open_at(self, now: float) -> float | None:
        """When the occurrence that covers ``now`` opened, or None when the window is closed."""
        tz = ZoneInfo(self.timezone)
        local = datetime.fromtimestamp(now, UTC).astimezone(tz)
        opened: datetime = croniter(self.cron, local).get_prev(datetime)
        if local.second == 0 and croniter.match(self.cron, local):
            opened = local  # a firing exactly now opens the window now
        start = opened.timestamp()
        return start if start <= now < start + self.duration else None

    def describe(self, budget: Budget) -> str:
        share = f"{budget:.0%}" if isinstance(budget, float) else str(budget)
        return (
            f'max_disrupted {share} in the window "{self.cron}" ({self.timezone}) for {format_duration(self.duration)}'
        )


def active_budget(
    max_disrupted: Budget | None,
    windows: Sequence[DisruptionWindow],
    counted: int,
    now: float,
) -> tuple[int | None, str | None]:
    """(instances that may drain at once — None: no limit —, the open window that set it or None)."""
    best: int | None = None if max_disrupted is None else budget_count(max_disrupted, counted)
    why: str | None = None
    for window in windows:
        if window.open_at(now) is None:
            continue
        allowed = budget_count(window.max_disrupted, counted)
        if best is None or allowed < best:
            best, why = allowed, window.describe(window.max_disrupted)
    return best, why
