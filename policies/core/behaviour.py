"""How the count moves toward the need: out at once, in slowly and never into a burst that is due.

- **Unknown** (missing or stale readings): hold, never scale in, never to zero; below the floor → the floor.
- **Out**: in the tick the need exceeds the count, straight to it.
- **Idle**: nothing arriving and nothing waiting for ``Pace.idle_s`` → the floor at once.
- **In**: only to the highest need of the last ``Pace.window_s`` (HPA's scale-down stabilisation), only
  after a full window of known readings, never below what a recurring burst due within the boot horizon
  needs (``hold``, from periodicity), at most ``Pace.fraction`` of the fleet per ``Pace.period_s``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalectl.policies.common import dur
from scalectl.policies.core.constants import IDLE_S, SCALE_IN_FRACTION, SCALE_IN_PERIOD_S, STABLE_WINDOW_S


@dataclass(frozen=True, slots=True)
class Pace:
    """How fast the count may fall: the tier's `stabilization`, `scale_in_max_fraction`, `scale_in_period` and
    `idle_after` settings (the constants are their defaults)."""

    window_s: float = STABLE_WINDOW_S
    fraction: float = SCALE_IN_FRACTION
    period_s: float = SCALE_IN_PERIOD_S
    idle_s: float = IDLE_S


@dataclass(frozen=True, slots=True)
class BehaviourState:
    needs: tuple[tuple[float, int], ...] = ()  # (time, need), a sliding-window maximum: each exceeds all later
    known_since: float | None = None
    idle_since: float | None = None
    scaled_in_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "needs": [list(n) for n in self.needs],
            "known_since": self.known_since,
            "idle_since": self.idle_since,
            "scaled_in_at": self.scaled_in_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> BehaviourState:
        data = data or {}
        needs = tuple((float(t), int(n)) for t, n in data.get("needs", ()))
        return cls(needs, data.get("known_since"), data.get("idle_since"), data.get("scaled_in_at"))


@dataclass(frozen=True, slots=True)
class Hold:
    count: int
    text: str  # "a 15m burst is due in 4m"


def unknown(state: BehaviourState, *, current: int, floor: int, why: str) -> tuple[int, str, BehaviourState]:
    """Missing or stale readings: hold (the window starts again once they are back)."""
    cleared = BehaviourState(scaled_in_at=state.scaled_in_at)
    if current < floor:
        return floor, f"{why}: {current} is below the floor → {floor}", cleared
    return current, f"{why} (no scale-in on missing data) → hold {current}", cleared


def move(
    state: BehaviourState,
    *,
    now: float,
    need: int,
    current: int,
    floor: int,
    idle: bool,
    hold: Hold | None,
    pace: Pace = Pace(),  # frozen: one shared default is safe
) -> tuple[int, str, BehaviourState]:
    needs = (*((t, n) for t, n in state.needs if t > now - pace.window_s and n > need), (now, need))
    known_since = state.known_since if state.known_since is not None else now
    idle_since = (state.idle_since if state.idle_since is not None else now) if idle else None
    new = BehaviourState(needs, known_since, idle_since, state.scaled_in_at)
    target = max(need, floor)
    if target > current:
        return target, f"→ {target}", new
    if idle_since is not None and now - idle_since >= pace.idle_s:
        rest = max(floor, hold.count if hold is not None else 0)  # a burst due still gets its instances
        if rest < current:
            why = f"nothing arriving or waiting for {dur(now - idle_since)}"
            why += f" → floor {floor}" if rest == floor else f"; held {rest}: {hold.text if hold else ''} → {rest}"
            return rest, why, _scaled(new, now)
    highest = max(needs[0][1], floor)
    if hold is not None and hold.count > highest:
        if hold.count >= current:
            return current, f"held {current}: {hold.text}", new
        highest = hold.count
    if highest >= current:
        return current, f"highest need over {dur(pace.window_s)} {highest} → hold {current}", new
    if now - known_since < pace.window_s:
        return current, f"readings known for {dur(now - known_since)} of {dur(pace.window_s)} → hold {current}", new
    if state.scaled_in_at is not None and now - state.scaled_in_at < pace.period_s:
        wait = dur(pace.period_s - (now - state.scaled_in_at))
        return current, f"next scale-in step in {wait} → hold {current}", new
    step = max(1, math.floor(current * pace.fraction))
    desired = max(highest, current - step)
    why = f"highest need over {dur(pace.window_s)} {highest}"
    if hold is not None and hold.count == highest:
        why = f"held {highest}: {hold.text}"
    if desired > highest:
        why += f"; at most {step} per {dur(pace.period_s)}"
    return desired, f"{why} → {desired}", _scaled(new, now)


def _scaled(state: BehaviourState, now: float) -> BehaviourState:
    return BehaviourState(state.needs, state.known_since, state.idle_since, now)
