"""Create→ready time of the tier's launches, measured from the policy's own inputs.

When the count is raised by k, k launches are pending from that tick; each later rise of the ready count
(``current − booting``) completes the oldest pending launches, one sample each (now − launch). A lower
desired count withdraws the newest pending launches. The last ``KEEP`` samples are kept in
``PolicyState.learned`` (persisted), and ``boot_time`` is their 90th percentile: the lead time forecasts
and schedules act ahead by. A launch still pending after ``GIVE_UP_S`` is dropped (it failed and was
replaced; the replacement is a new launch the reconciler made, not one the policy asked for).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

KEEP = 20
MIN_SAMPLES = 3
BOOT_QUANTILE = 0.9  # the boot time a policy acts on: one launch in ten takes longer
GIVE_UP_S = 3600.0
_PENDING, _SAMPLE, _READY, _SEQ = "boot.p.", "boot.s.", "boot.ready", "boot.seq"


def _entries(learned: Mapping[str, float], prefix: str) -> list[tuple[int, float]]:
    return sorted((parsed[1], v) for k, v in learned.items() if (parsed := _numbered(k)) and parsed[0] == prefix)


@functools.lru_cache(maxsize=4096)
def _numbered(key: str) -> tuple[str, int] | None:
    """(prefix, number) of a pending-launch or sample key, else None. Cached: every tick reads them all."""
    for prefix in (_PENDING, _SAMPLE):
        if key.startswith(prefix):
            return prefix, int(key[len(prefix) :])
    return None


def samples(learned: Mapping[str, float]) -> list[float]:
    """The recent create→ready samples, or none with fewer than three."""
    found = [v for _, v in _entries(learned, _SAMPLE)]
    return found if len(found) >= MIN_SAMPLES else []


def pending(learned: Mapping[str, float]) -> list[float]:
    """When each launch still booting was asked for, oldest first."""
    return [t for _, t in _entries(learned, _PENDING)]


def percentile(learned: Mapping[str, float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of the recent create→ready samples, or None with fewer than three."""
    found = sorted(samples(learned))
    if not found:
        return None
    return found[max(0, min(len(found) - 1, math.ceil(q * len(found)) - 1))]


def boot_time(learned: Mapping[str, float]) -> float | None:
    """The 90th percentile of the recent create→ready samples, or None with fewer than three."""
    return percentile(learned, BOOT_QUANTILE)


def observe(learned: Mapping[str, float], *, now: float, ready: int, current: int, desired: int) -> dict[str, float]:
    out = dict(learned)
    pending = [(i, t) for i, t in _entries(out, _PENDING) if now - t <= GIVE_UP_S]
    for key in [k for k in out if (parsed := _numbered(k)) and parsed[0] == _PENDING]:
        del out[key]
    seq = int(out.get(_SEQ, 0))
    previous = out.get(_READY)
    if previous is not None and ready > previous:
        done, pending = pending[: int(ready - previous)], pending[int(ready - previous) :]
        for _, t0 in done:
            out[f"{_SAMPLE}{seq}"] = round(now - t0, 3)
            seq += 1
        samples = _entries(out, _SAMPLE)
        for i, _ in samples[: max(0, len(samples) - KEEP)]:
            del out[f"{_SAMPLE}{i}"]
    out[_READY] = float(ready)
    if desired > current:
        pending += [(seq + n, now) for n in range(desired - current)]
        seq += desired - current
    pending = pending[: max(0, desired - ready)]  # a lower count withdraws the newest launches
    for i, t0 in pending[-64:]:
        out[f"{_PENDING}{i}"] = t0
    out[_SEQ] = float(seq)
    return out
