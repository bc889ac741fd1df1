"""The scale-in stabilization window, learned from the tier's own scale-ins that had to be undone.

Target tracking scales in only to the highest need over the window (``stabilization``, 5 minutes by
default: HPA's). That suits a load that falls and stays down. A load that comes back in bursts minutes
apart (the Azure code trace goes from nothing to thousands of requests a minute and back, minute after
minute) is released after each lull and met again by instances that take minutes to boot: every burst
after a lull misses the target. No fixed window suits both.

So the window learns. A scale-in is *undone* when the need rises above the count it scaled in to within
twice the window and the TTFT target is breached while the tier is short (from that rise until twice the
window has passed): releasing those instances cost requests, and the window doubles, up to
``stabilization_max``. A rise the remaining instances carried within the target costs nothing (a small
fleet stepping 2 → 3 → 2 on noise) and teaches nothing. A scale-in that holds for twice the window brings
it down by a quarter, once, never below ``stabilization``.

It is still watched until ``stabilization_max`` has passed: bursts an hour apart (the Azure code trace at
a small scale) come back after the window has narrowed, and each one released and met again by booting
instances costs the SLO a whole burst. Such a late return counts only when the load's own need is back
within the count the scale-ins started from (the released burst came back; a new, higher peak is not one
the released instances would have carried) and the breach is severe (TTFT p95 over the target: a
twentieth of the requests late, ten times a 99.5% SLO's share; a small fleet stepping on its p99's noise
is not worth holding instances an hour for). One alone may be an unannounced step that will not come
back, so it is remembered; the second within ``RECUR`` times ``stabilization_max`` widens the window to
``stabilization_max``. A load with harmful lulls shorter than the window is then held through them; a
load in a real decline steps down as before, with the window shrinking back at each step. The window is
kept in the policy state and survives restarts.
"""

from __future__ import annotations

from collections.abc import Mapping

from scalectl.policies.spec import ReactiveRules

WINDOW, IN_AT, IN_TO = "hysteresis.window", "hysteresis.in_at", "hysteresis.in_to"
IN_FROM = "hysteresis.in_from"  # the count the watched scale-ins started from (the most released)
HELD = "hysteresis.held"  # the watched scale-in held for twice the window (the window came down once for it)
ROSE_AT = "hysteresis.rose_at"  # when the need last rose past a recent scale-in (harm not yet seen)
LONG = "hysteresis.long"  # set while the rise watched came after twice the window (a burst back after a lull)
LONG_AT = "hysteresis.long_at"  # when such a burst last undid a scale-in: one alone may be an unannounced step
RECUR = 4.0  # ... so it widens the window only if another came within this many times `stabilization_max`
WIDEN, NARROW = 2.0, 0.75


def window(rules: ReactiveRules, learned: Mapping[str, float]) -> float:
    """The stabilization window now: the configured one, widened by scale-ins that were undone."""
    learned_window = learned.get(WINDOW, rules.stabilization)
    return min(max(learned_window, rules.stabilization), _widest(rules))


def _widest(rules: ReactiveRules) -> float:
    return max(rules.stabilization, rules.stabilization_max)


def observe(
    rules: ReactiveRules, learned: Mapping[str, float], now: float, breached: bool, severe: bool
) -> dict[str, float]:
    """This tick's verdicts: a rise past a scale-in followed by a breach undid it (the window doubles; a
    burst back after a long lull needs a ``severe`` breach, and a second such within ``RECUR`` times
    ``stabilization_max`` to widen it, to ``stabilization_max``); a scale-in that held for twice the
    window was right (it comes down by a quarter, once); a rise that breached nothing for twice the
    window is forgotten."""
    out = dict(learned)
    current = window(rules, out)
    rose = out.get(ROSE_AT)
    if rose is not None:
        long_lull = out.get(LONG) is not None
        if breached and not long_lull:
            out[WINDOW] = min(_widest(rules), current * WIDEN)
            del out[ROSE_AT]
        elif breached and severe:
            last = out.get(LONG_AT)
            if last is not None and now - last <= RECUR * _widest(rules):
                out[WINDOW] = _widest(rules)
            out[LONG_AT] = now
            del out[ROSE_AT], out[LONG]
        elif now - rose > 2 * current:
            del out[ROSE_AT]
            out.pop(LONG, None)
    at = out.get(IN_AT)
    if at is not None and now - at > 2 * current and not out.get(HELD):
        out[WINDOW] = max(rules.stabilization, current * NARROW)
        out[HELD] = 1.0
    if at is not None and now - at > max(2 * current, _widest(rules)):
        _forget(out)
    return out


def _forget(learned: dict[str, float]) -> None:
    for key in (IN_AT, IN_TO, IN_FROM, HELD):
        learned.pop(key, None)


def scaled_in(learned: Mapping[str, float], now: float, to: int, was: int) -> dict[str, float]:
    """Remember a scale-in from ``was`` to ``to``, to tell later whether it held. Steps of one decline
    (each within the watch of the last) keep the count the first started from."""
    start = max(was, learned.get(IN_FROM, was)) if IN_AT in learned else was
    out = {**learned, IN_AT: now, IN_TO: float(to), IN_FROM: float(start)}
    out.pop(HELD, None)
    return out


def scaling_out(
    rules: ReactiveRules,
    learned: Mapping[str, float],
    now: float,
    to: int,
    load_need: int,
    breached: bool,
    severe: bool,
) -> dict[str, float]:
    """A scale-out to ``to`` past the count the last scale-in went to, within twice the window, or within
    ``stabilization_max`` when the load's own need (``load_need``, before any breach step) is back within
    the count the scale-ins started from: if the target is breached now or before twice the window has
    passed (``observe``), the scale-in was undone."""
    out = dict(learned)
    at, was, start = out.get(IN_AT), out.get(IN_TO), out.get(IN_FROM)
    if at is None or was is None or to <= was:
        return out
    _forget(out)
    current = window(rules, out)
    # Within twice the window any return counts; after it, only the return of what was released (a burst
    # that comes back): a new, higher peak is not one the released instances would have held.
    returned = start is None or load_need <= start
    if now - at <= 2 * current or (returned and now - at <= _widest(rules)):
        out[ROSE_AT] = now
        out.pop(LONG, None)
        if now - at > 2 * current:
            out[LONG] = 1.0
        return observe(rules, out, now, breached, severe)
    return out


def widened(rules: ReactiveRules, learned: Mapping[str, float]) -> bool:
    """Whether the window is wider than configured (the reason says so)."""
    return window(rules, learned) > rules.stabilization
