"""KEDA's scaling algorithm (a ScaledObject on the HPA) as a scalectl policy, to measure it on your workload.

Use it from tiers.yaml::

    policy:
      kind: external
      class: "examples.policies.keda_scaler:KedaScaledObject"
      options:
        metric: "requests_running+requests_waiting"  # Signals fields, summed (KEDA: the trigger's metric)
        target: 80                 # metric per instance (KEDA: AverageValue target)
        activation: 0              # the metric must exceed this to leave zero (activationTargetValue)
        polling_interval: 30s      # KEDA pollingInterval: the metric is read this often
        stabilization_window: 5m   # HPA scaleDown.stabilizationWindowSeconds
        cooldown: 5m               # KEDA cooldownPeriod: inactive this long before scaling to zero
        scale_up_max: 4            # HPA scaleUp policy: at most +max(4 instances, 100%) per 15 s (default)

What it does, as KEDA and the HPA do: every ``polling_interval``, desired = ceil(metric / target); scale up
at once (bounded by the scale-up policy); scale down only to the highest desired of the stabilisation
window; to zero only when the metric has been at or below ``activation`` for ``cooldown``. An unknown
metric holds the current count (KEDA's fallback is off by default; the HPA keeps the last scale). The
tier's min, max and budget are applied afterwards by scalectl. Its memory lives in the object, as in
KEDA's operator, so a decision does not replay from recorded policy state.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from scalectl.policies.durations import parse_duration
from scalectl.policies.types import Bounds, Signals

_FIELDS = set(Signals.__dataclass_fields__)


class KedaScaledObject:
    def __init__(self, options: dict[str, Any], bounds: Bounds | None) -> None:
        self.metric = [part.strip() for part in str(options.get("metric", "queue_depth")).split("+")]
        unknown = [m for m in self.metric if m not in _FIELDS]
        if unknown:
            raise ValueError(f"options.metric: unknown signal {unknown[0]!r}; use one of {', '.join(sorted(_FIELDS))}")
        self.target = float(options.get("target", 10))
        if self.target <= 0:
            raise ValueError(f"options.target must be > 0, got {self.target}")
        self.activation = float(options.get("activation", 0))
        self.polling_interval = parse_duration(options.get("polling_interval", 30))
        self.stabilization_window = parse_duration(options.get("stabilization_window", 300))
        self.cooldown = parse_duration(options.get("cooldown", 300))
        self.scale_up_max = int(options.get("scale_up_max", 4))
        self.bounds = bounds
        self._recommendations: deque[tuple[float, int]] = deque()
        self._last_poll: float | None = None
        self._last_active: float | None = None
        self._desired: int | None = None
        self._reason = ""

    def _read(self, signals: Signals) -> float | None:
        values = [getattr(signals, name) for name in self.metric]
        return None if any(v is None for v in values) else float(sum(values))

    def decide(self, now: float, signals: Signals, current: int) -> tuple[int, str]:
        if self._last_poll is not None and now - self._last_poll < self.polling_interval and self._desired is not None:
            return (
                self._desired,
                f"{self._reason} (next poll in {self.polling_interval - (now - self._last_poll):.0f}s)",
            )
        self._last_poll = now
        value = self._read(signals)
        name = "+".join(self.metric)
        if value is None:
            self._desired, self._reason = current, f"{name} unknown: hold"
            return current, self._reason
        if value > self.activation:
            self._last_active = now
        raw = math.ceil(round(value / self.target, 9)) if value > 0 else 0
        if raw == 0 and current > 0 and self._last_active is not None and now - self._last_active < self.cooldown:
            raw = 1  # active recently: KEDA keeps one replica until the cooldown passes
        self._recommendations.append((now, raw))
        while self._recommendations and self._recommendations[0][0] < now - self.stabilization_window:
            self._recommendations.popleft()
        if raw > current:
            desired = min(raw, current + max(self.scale_up_max, current))  # +max(4 pods, 100%) per period
            why = f"{name} {value:g} / {self.target:g} = {raw} > {current}"
        else:
            desired = max(r for _, r in self._recommendations)
            desired = min(desired, current)
            window = f"{self.stabilization_window:g}s"
            why = f"{name} {value:g} / {self.target:g} = {raw}; highest in the {window} window: {desired}"
        self._desired, self._reason = desired, why
        return desired, why
