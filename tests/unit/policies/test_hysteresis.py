"""The learned scale-in window: scale-ins undone by the load's return (with a TTFT breach) widen it; scale-ins that
hold narrow it; a return the remaining instances carry within the target teaches nothing."""

from __future__ import annotations

from scalectl.policies.types import Bounds
from tests.unit.policies.helpers import Runner, spec
from tests.unit.policies.test_tracking import PLAIN, vllm


def runner(current: int, **fields: object) -> Runner:
    return Runner(spec(**{**PLAIN, **fields}), bounds=Bounds(min=1, max=40), current=current)


def back(run: Runner, at: int, breached: bool = True) -> None:
    """The load returns: need 10 again, with TTFT over the target while the instances boot."""
    run.tick(at, **vllm(850, ttft_p95_s=0.9 if breached else 0.2))


def busy_then_lull(run: Runner, start: int, lull: int) -> int:
    """Five minutes at need 10, then a lull at need 2 for ``lull`` seconds; the time after it."""
    for t in range(start, start + 300, 10):
        run.tick(t, **vllm(850))
    for t in range(start + 300, start + 300 + lull, 10):
        run.tick(t, **vllm(170))
    return start + 300 + lull


def test_a_scale_in_undone_within_twice_the_window_doubles_it() -> None:
    run = runner(current=10)
    end = busy_then_lull(run, 0, 420)  # scaled in at 5:01 of the lull, to 5
    assert run.current < 10
    back(run, end)  # the load is back 2 minutes later and the requests wait for the boots
    assert run.current >= 10
    assert run.state.learned["hysteresis.window"] == 600


def test_with_the_window_widened_a_lull_shorter_than_it_is_held_through() -> None:
    run = runner(current=10)
    end = busy_then_lull(run, 0, 420)
    back(run, end)
    end = busy_then_lull(run, end + 10, 420)  # the same 7-minute lull: under the 10-minute window
    assert run.current == 10
    decision = run.tick(end - 10, **vllm(170))
    assert "highest need over 10m (widened from 5m: scale-ins were undone) 10 → hold 10" in decision.reason


def test_the_window_doubles_up_to_stabilization_max() -> None:
    run = runner(current=10, stabilization_max="15m")
    t = 0
    for lull in (420, 720, 1320):  # each lull a little longer than the window it meets: 5, 10, then 15 min
        t = busy_then_lull(run, t, lull)
        back(run, t)
        t += 10
    assert run.state.learned["hysteresis.window"] == 900


def test_a_scale_in_that_holds_for_twice_the_window_narrows_it_back() -> None:
    run = runner(current=10)
    end = busy_then_lull(run, 0, 420)
    back(run, end)  # window 10 minutes
    end = busy_then_lull(run, end + 10, 660)  # a real decline: scaled in at 10:01 of the lull
    assert run.current < 10
    for t in range(end, end + 1300, 10):  # the load stays down for more than twice the window
        run.tick(t, **vllm(170))
    assert run.state.learned["hysteresis.window"] == 450  # 10 min × 0.75


def test_a_fixed_window_when_stabilization_max_is_the_window() -> None:
    run = runner(current=10, stabilization_max="5m")
    end = busy_then_lull(run, 0, 420)
    back(run, end)
    end = busy_then_lull(run, end + 10, 420)
    assert run.current < 10  # released again: the window stayed at 5 minutes


def test_a_return_carried_within_the_target_teaches_nothing() -> None:
    """A small fleet stepping back up on noise, TTFT within the target throughout: the window stays."""
    run = runner(current=10)
    end = busy_then_lull(run, 0, 420)
    back(run, end, breached=False)
    for t in range(end + 10, end + 1300, 10):
        run.tick(t, **vllm(850))
    assert "hysteresis.window" not in run.state.learned


def test_a_breach_after_the_return_while_the_instances_boot_undoes_the_scale_in() -> None:
    run = runner(current=10)
    end = busy_then_lull(run, 0, 420)
    back(run, end, breached=False)  # the load-based need sees the burst first
    back(run, end + 30, breached=True)  # the requests it brought wait: TTFT over the target
    assert run.state.learned["hysteresis.window"] == 600


def test_bursts_that_come_back_after_the_scale_in_held_widen_the_window_to_its_widest() -> None:
    """Bursts 40 minutes apart: each scale-in held past twice the window, so the old rule never learned
    from the burst after it. Now a scale-in is watched up to `stabilization_max`; one such return may be
    an unannounced step, the second within four times `stabilization_max` widens the window to it."""
    run = runner(current=10)
    end = busy_then_lull(run, 0, 2400)  # scaled in within the lull's first minutes, then 30+ minutes down
    scaled_in_at = run.state.learned["hysteresis.in_at"] - run.start
    assert end - scaled_in_at > 2 * 300  # it held for twice the window
    back(run, end)
    assert run.current >= 10
    assert run.state.learned.get("hysteresis.window", 300) == 300  # the first: not yet
    end = busy_then_lull(run, end + 10, 2400)
    back(run, end)
    assert run.state.learned["hysteresis.window"] == 3600
    end = busy_then_lull(run, end + 10, 2400)
    assert run.current >= 10  # the next lull is held through


def test_after_a_long_lull_a_breach_of_the_tail_alone_teaches_nothing() -> None:
    """Returns whose requests mostly meet the target (p99 over, p95 within: a small fleet stepping on its
    tail's noise) are not worth holding instances an hour for; the short-range rule still learns from
    such a breach, this one does not."""
    run = runner(current=10)
    for start in (0, 2710):
        end = busy_then_lull(run, start, 2400)
        run.tick(end, **vllm(850, ttft_p95_s=0.3, ttft_p99_s=0.9))
    assert run.current >= 10
    assert run.state.learned.get("hysteresis.window", 300) == 300


def test_one_step_a_day_is_not_a_recurring_burst() -> None:
    """Two returns after long lulls more than four hours apart: each alone, neither widens the window."""
    run = runner(current=10)
    end = busy_then_lull(run, 0, 2400)
    back(run, end)
    end = busy_then_lull(run, end + 5 * 3600, 2400)
    back(run, end)
    assert run.state.learned.get("hysteresis.window", 300) == 300


def test_a_higher_peak_after_the_scale_in_held_teaches_nothing() -> None:
    """An unannounced step half an hour after a scale-in from 10, to a need of 20: the instances released
    would not have carried it, so it is not a burst the window should have held."""
    run = runner(current=10)
    end = busy_then_lull(run, 0, 2400)
    back(run, end)  # a burst came back once: remembered
    end = busy_then_lull(run, end + 10, 2400)
    run.tick(end, **vllm(1700, ttft_p95_s=0.9))  # need 20
    assert run.current >= 20
    assert run.state.learned.get("hysteresis.window", 300) == 300


def test_a_scale_in_that_held_longer_than_stabilization_max_teaches_nothing() -> None:
    """The morning after an evening's scale-in is a new day's load, not a burst the window should hold."""
    run = runner(current=10, stabilization_max="30m")
    end = busy_then_lull(run, 0, 2400)
    back(run, end)
    end = busy_then_lull(run, end + 10, 2400)
    back(run, end)
    assert run.current >= 10
    assert run.state.learned.get("hysteresis.window", 300) == 300


def test_a_scale_in_that_held_narrows_the_window_once() -> None:
    run = runner(current=10)
    end = busy_then_lull(run, 0, 420)
    back(run, end)  # window 10 minutes
    end = busy_then_lull(run, end + 10, 660)  # scaled in at 10:01 of the lull
    for t in range(end, end + 3000, 10):  # down for 50 minutes: twice the window, then more
        run.tick(t, **vllm(170))
    assert run.state.learned["hysteresis.window"] == 450  # 10 min × 0.75, not again for each tick after
