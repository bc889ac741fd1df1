"""Instances needed at now + the boot horizon: each usable forecast plus its own error quantile, plus a
growing backlog's drain, over capacity per instance at the SLO. The most demanding forecast wins: they
see different things (a surge now, a burst due, yesterday's morning), and missing any costs the SLO.

Headroom is the forecast's measured shortfall (forecast.py), not a target utilisation; until a
forecaster has been checked ``ERR_MIN`` times, ``COLD_HEADROOM`` of its value stands in and the reason
says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scalectl.policies.common import ceil_count, dur
from scalectl.policies.core.capacity import Capacity
from scalectl.policies.core.constants import COLD_HEADROOM, ERR_QUANTILE
from scalectl.policies.core.forecast import Forecast


@dataclass(frozen=True, slots=True)
class Need:
    count: int
    text: str


def size(forecasts: Sequence[Forecast], cap: Capacity, *, unit: str, horizon: float, backlog: float = 0.0) -> Need:
    """``backlog``: units/s that drain a backlog which is not shrinking (0 when there is none)."""
    best: tuple[int, str] | None = None
    for f in forecasts:
        if f.value is None:
            continue
        err = f.err if f.err is not None else COLD_HEADROOM * f.value
        count = ceil_count((f.value + err + backlog) / cap.per_instance)
        if best is None or count > best[0]:
            head = f"err p{ERR_QUANTILE * 100:.0f} {err:.3g}" if f.err is not None else "err unmeasured: +25%"
            drain = f" + {backlog:.3g} backlog" if backlog else ""
            detail = f"{f.name}, {f.note}" if f.note else f.name
            best = (
                count,
                (
                    f"ceil(({f.value:.3g} + {err:.3g}{drain}) {unit} at +{dur(horizon)} ({detail}; {head})"
                    f" ÷ {cap.per_instance:.3g} {unit} per instance ({cap.how}, {cap.ratio:.2g}× prior))"
                ),
            )
    out = [f"{f.name}: {f.note}" for f in forecasts if f.value is None]
    tail = f" [out: {'; '.join(out)}]" if out else ""
    if best is None:
        return Need(0, f"no forecast yet{tail}")
    return Need(best[0], f"need {best[0]} = {best[1]}{tail}")
