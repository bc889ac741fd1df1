"""Bursts shorter than the reading window: the arrival rate of one tick, beyond what chance explains.

The load's rate is averaged over the reading window (a minute). Traffic from agents and code assistants
arrives in bursts of seconds at several times that average; a fleet sized for the minute's mean serves
the burst's requests seconds late, and at a sub-second TTFT target they all miss. The tick's own count
shows such a burst. Poisson arrivals at a steady rate also vary from tick to tick, by about √n, and a fleet
sized to every upward draw would pay for noise: so a tick counts at the lower edge of its count's
two-sigma range, (n − 2√n) ÷ tick, which exceeds the window's rate only where the burst is real.
"""

from __future__ import annotations

import math

SIGMAS = 2.0


def burst_rate(arrivals: float | None, tick_s: float | None) -> float | None:
    """Arrivals per second this tick, at the low edge of what a Poisson count of ``arrivals`` allows;
    None when the count or the tick's length is unknown."""
    if arrivals is None or tick_s is None or tick_s <= 0 or arrivals <= 0:
        return None
    return max(arrivals - SIGMAS * math.sqrt(arrivals), 0.0) / tick_s
