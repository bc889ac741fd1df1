"""Target tracking on request rate: keep each instance near ``target_rps`` requests per second.

Use it from tiers.yaml::

    policy:
      kind: external
      class: "examples.policies.target_tracking:RequestRateTargetTracking"
      options: {target_rps: 40, scale_in_ratio: 0.8}

desired = ceil(request_rate / target_rps). Scale-in waits until the rate falls below
``scale_in_ratio`` × the capacity of one fewer instance (a band against flapping). An unknown rate
holds. The tier's min, max and budget are applied afterwards by scalectl.
"""

from __future__ import annotations

import math
from typing import Any

from scalectl.policies.types import Bounds, Signals


class RequestRateTargetTracking:
    def __init__(self, options: dict[str, Any], bounds: Bounds | None) -> None:
        self.target_rps = float(options.get("target_rps", 40))
        self.scale_in_ratio = float(options.get("scale_in_ratio", 0.8))
        if self.target_rps <= 0:
            raise ValueError(f"options.target_rps must be > 0, got {self.target_rps}")
        if not 0 < self.scale_in_ratio <= 1:
            raise ValueError(f"options.scale_in_ratio must be in (0, 1], got {self.scale_in_ratio}")
        self.bounds = bounds

    def decide(self, now: float, signals: Signals, current: int) -> tuple[int, str]:
        rate = signals.request_rate
        if rate is None:
            return current, "request_rate unknown: hold"
        need = math.ceil(round(rate / self.target_rps, 9))
        if need > current:
            return need, f"{rate:g} req/s > {self.target_rps:g} × {current}"
        if need < current and rate < self.scale_in_ratio * self.target_rps * (current - 1):
            return need, f"{rate:g} req/s < {self.scale_in_ratio:g} × {self.target_rps:g} × {current - 1}"
        return current, f"{rate:g} req/s within target {self.target_rps:g} × {current}"
