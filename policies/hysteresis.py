"""The scale-in stabilization window, learned from the tier's own scale-ins that had to be undone.

Target tracking scales in only to the highest need over the window (``stabilization``, 5 minutes by
default: HPA's). That suits a load that falls and stays down. A load that comes back in bursts minutes
apart (the Azure code trace goes from nothing to thousands of requests a minute and back, minute after
minute) is released after each lull and met again by instances that take minutes to boot: every burst
after a lull misses the target. No fixed window suits both.

So the window learns. A scale-in is *undone* when the need rises above the count it scaled in to within
twice the window, and the TTFT target is breached while the tier is short (from that rise until twice the
window has passed): releasing those instances cost requests, and a window twice as long would have held
them through the lull. A rise the remaining instances carried within the target costs nothing (a small
fleet stepping 2 → 3 → 2 on noise) and teaches nothing. Each undone scale-in doubles the window, up to
``stabilization_max``; each scale-in that holds for twice the window brings it down by a quarter, never
below ``stabilization``. A load with harmful lulls shorter than the window is then never released; a load
in a real decline steps down as before, with the window shrinking back at each step. The window is kept in
the policy state and survives restarts.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.spec import ReactiveRules

WINDOW, IN_AT, IN_TO = "hysteresis.window", "hysteresis.in_at", "hysteresis.in_to"
ROSE_AT = "hysteresis.rose_at"  # when the need last rose past a recent scale-in (harm not yet seen)
WIDEN, NARROW = 2.0, 0.75


def window(rules: ReactiveRules, learned: Mapping[str, float]) -> float:
    """The stabilization window now: the configured one, widened by scale-ins that were undone."""
    learned_window = learned.get(WINDOW, rules.stabilization)
    return min(max(learned_window, rules.stabilization), _widest(rules))


def _widest(rules: ReactiveRules) -> float:
    return max(rules.stabilization, rules.stabilization_max)


def observe(rules: ReactiveRules, learned: Mapping[str, float], now: float, breached: bool) -> dict[str, float]:
    """This tick's verdicts: a rise past a scale-in followed by a breach undid it (the window doubles); a
    scale-in that held for twice the window was right (it comes down by a quarter); a rise that breached
    nothing for twice the window is forgotten."""
    out = dict(learned)
    current = window(rules, out)
    rose = out.get(ROSE_AT)
    if rose is not None:
        if breached:
            out[WINDOW] = min(_widest(rules), current * WIDEN)
            del out[ROSE_AT]
        elif now - rose > 2 * current:
            del out[ROSE_AT]
    at = out.get(IN_AT)
    if at is not None and now - at > 2 * current:
        out[WINDOW] = max(rules.stabilization, current * NARROW)
        del out[IN_AT], out[IN_TO]
    return out


def scaled_in(learned: Mapping[str, float], now: float, to: int) -> dict[str, float]:
    """Remember a scale-in, to tell later whether it held."""
    return {**learned, IN_AT: now, IN_TO: float(to)}


def scaling_out(
    rules: ReactiveRules, learned: Mapping[str, float], now: float, to: int, breached: bool
) -> dict[str, float]:
    """A scale-out past the count the last scale-in went to, within twice the window: if the target is
    breached now or before twice the window has passed (``observe``), the scale-in was undone."""
    out = dict(learned)
    at, was = out.get(IN_AT), out.get(IN_TO)
    if at is None or was is None or to <= was:
        return out
    del out[IN_AT], out[IN_TO]
    if now - at <= 2 * window(rules, out):
        out[ROSE_AT] = now
        return observe(rules, out, now, breached)
    return out


def widened(rules: ReactiveRules, learned: Mapping[str, float]) -> bool:
    """Whether the window is wider than configured (the reason says so)."""
    return window(rules, learned) > rules.stabilization
