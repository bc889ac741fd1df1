"""The boot-aware clairvoyant: the oracle's fleet, launched a boot ahead and paying for every boot.

The oracle (``scalectl.simulator.baselines.oracle``) has each minute's fewest instances the moment it needs
them, as if machines appeared from nowhere. No policy can do that: even one that knows the future load
must launch each instance a boot before it is needed, and the cloud bills the boot. The clairvoyant knows
both the load and each instance's boot time (drawn from the run's boot model), so it is the honest limit
of any online policy on the same fleet model: cost ÷ clairvoyant is how far a policy is from what the
boot time allows, where cost ÷ oracle also counts what no policy can avoid.

How it pays: the need timeline is cut into slots (slot k is busy in every step where the need is at least
k). An instance present at the start pays no boot (the run starts with the fleet its policy holds at idle,
as every baseline does). Each later start of a busy stretch is an instance launched its boot ahead: the
boot is billed. Between two busy stretches of one slot, the clairvoyant keeps the instance running when
the gap is no longer than the boot it would pay to launch again, and pays the gap instead (the offline
ski-rental choice). The ready fleet is never below the oracle's, so it meets the SLO wherever the oracle
does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class ClairvoyantPlan:
    boot_s: float  # instance-seconds billed while booting (every launch after the start)
    kept_s: float  # instance-seconds billed keeping an instance through a gap shorter than a boot
    launches: int  # instances launched after the start
    ready: np.ndarray  # instances ready in each step of the need timeline (never below the need)

    @property
    def extra_s(self) -> float:
        """Instance-seconds the clairvoyant bills beyond the oracle."""
        return self.boot_s + self.kept_s


def _busy_runs(busy: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) step ranges where ``busy`` holds."""
    edges = np.diff(np.concatenate(([0], busy.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True))


def clairvoyant_plan(need: np.ndarray, step_s: float, draw_boot: Callable[[], float]) -> ClairvoyantPlan:
    """The clairvoyant's fleet for a need timeline (instances per step of ``step_s`` seconds); ``draw_boot``
    gives the boot of each launch it considers, in order (slot by slot, stretch by stretch)."""
    levels = np.ceil(np.asarray(need, dtype=np.float64)).astype(np.int64)
    ready = levels.copy()
    boot_s = kept_s = 0.0
    launches = 0
    for slot in range(1, int(levels.max(initial=0)) + 1):
        previous_end: int | None = None
        for start, end in _busy_runs(levels >= slot):
            if start == 0:  # running when the run starts
                previous_end = end
                continue
            boot = draw_boot()
            gap = None if previous_end is None else (start - previous_end) * step_s
            if gap is not None and gap <= boot:  # cheaper to keep it running than to boot it again
                kept_s += gap
                ready[previous_end:start] += 1
            else:
                boot_s += boot
                launches += 1
            previous_end = end
    return ClairvoyantPlan(boot_s, kept_s, launches, ready)
