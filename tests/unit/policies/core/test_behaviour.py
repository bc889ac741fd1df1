"""Behaviour: out at once; scale-in held before a recurring burst, bounded per step, after a full window;
idle → the floor; unknown holds and never goes below the floor."""

from __future__ import annotations

from scalectl.policies.core.behaviour import BehaviourState, Hold, move, unknown
from tests.unit.policies.core.synth import T0

BURST = Hold(8, "a 15m burst is due in 4m")


def settled(need: int = 3) -> BehaviourState:
    """A full window of known readings behind, its needs all at ``need``."""
    return BehaviourState(needs=((T0 - 10, need),), known_since=T0 - 600)


def test_out_at_once_to_the_need() -> None:
    desired, text, _ = move(settled(), now=T0, need=12, current=4, floor=1, idle=False, hold=None)
    assert (desired, text) == (12, "→ 12")


def test_scale_in_is_held_before_a_recurring_burst() -> None:
    desired, text, _ = move(settled(), now=T0, need=3, current=8, floor=1, idle=False, hold=BURST)
    assert (desired, text) == (8, "held 8: a 15m burst is due in 4m")
    desired, _, _ = move(settled(), now=T0, need=3, current=8, floor=1, idle=False, hold=None)
    assert desired == 4  # without the burst: half the fleet this step


def test_scale_in_is_bounded_per_step_and_spaced() -> None:
    desired, text, state = move(settled(), now=T0, need=1, current=10, floor=1, idle=False, hold=None)
    assert (desired, text) == (5, "highest need over 5m 3; at most 5 per 1m → 5")
    desired, text, _ = move(state, now=T0 + 30, need=1, current=5, floor=1, idle=False, hold=None)
    assert (desired, text) == (5, "next scale-in step in 30s → hold 5")


def test_scale_in_waits_for_a_full_window_of_known_readings() -> None:
    fresh = BehaviourState(known_since=T0 - 60)
    desired, text, _ = move(fresh, now=T0, need=1, current=6, floor=1, idle=False, hold=None)
    assert (desired, text) == (6, "readings known for 1m of 5m → hold 6")


def test_idle_goes_to_the_floor_at_once_but_keeps_a_burst_due() -> None:
    idle = BehaviourState(known_since=T0 - 600, idle_since=T0 - 300)
    desired, text, _ = move(idle, now=T0, need=0, current=6, floor=2, idle=True, hold=None)
    assert (desired, text) == (2, "nothing arriving or waiting for 5m → floor 2")
    desired, _, _ = move(idle, now=T0, need=0, current=12, floor=2, idle=True, hold=BURST)
    assert desired == 8


def test_unknown_holds_and_never_goes_below_the_floor() -> None:
    desired, text, state = unknown(settled(), current=5, floor=1, why="requests unknown")
    assert (desired, text) == (5, "requests unknown (no scale-in on missing data) → hold 5")
    assert state.known_since is None  # the window starts again once the readings are back
    desired, _, _ = unknown(settled(), current=0, floor=2, why="requests unknown")
    assert desired == 2


def test_state_round_trips_through_its_dict() -> None:
    _, _, state = move(settled(), now=T0, need=1, current=10, floor=1, idle=False, hold=None)
    assert BehaviourState.from_dict(state.to_dict()) == state
