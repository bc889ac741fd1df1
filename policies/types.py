"""Values that flow into and out of a policy. Frozen, plain, reproducible from recorded data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from scalectl.policies.core.pipeline import CoreState


@dataclass(frozen=True, slots=True)
class Signals:
    """One observation of a tier. ``None`` means *unknown* (missing, stale or failed), never zero."""

    queue_depth: float | None = None
    in_flight: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_p99_s: float | None = None
    requests_waiting: float | None = None
    requests_running: float | None = None
    kv_cache_usage: float | None = None
    arrivals: float | None = None  # requests arrived since the previous tick
    request_rate: float | None = None  # requests arriving per second over the reading window
    # Requests finished per second over the reading window (vLLM's success counter): in an overload it is
    # what the fleet serves, not what arrives; with requests running it gives their service time.
    finish_rate: float | None = None
    prompt_tokens_rate: float | None = None  # prompt tokens per second over the reading window
    generation_tokens_rate: float | None = None
    prefix_cache_hit_rate: float | None = None  # share of prompt tokens found in the prefix cache (no prefill)

    def to_dict(self) -> dict[str, float | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Signals:
        names = {f.name for f in fields(cls)}
        return cls(**{k: (None if v is None else float(v)) for k, v in data.items() if k in names})


@dataclass(frozen=True, slots=True)
class PolicyState:
    """Sustained-window memory carried between ticks as data (so a decision replays from records).

    ``since`` maps a condition name (e.g. "queue_over") to the time it became continuously true;
    ``last_change`` is when the desired count last moved; ``peaks`` keeps the highest load seen while
    a condition held (scale-in sizes for the peak of its window, not one quiet sample). Policies return
    a new state every tick.
    """

    since: Mapping[str, float] = field(default_factory=dict)
    last_change: float | None = None
    last_desired: int | None = None
    peaks: Mapping[str, float] = field(default_factory=dict)
    # Learned figures that must survive restarts (capacity observations per load bin, launch times, …).
    learned: Mapping[str, float] = field(default_factory=dict)
    # The decision core's memory (target mode): history bins, forecast errors, learned capacity, its window.
    core: CoreState | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "core": None if self.core is None else self.core.to_dict(),
            "since": dict(self.since),
            "last_change": self.last_change,
            "last_desired": self.last_desired,
            "peaks": dict(self.peaks),
            "learned": dict(self.learned),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PolicyState:
        if not data:
            return cls()
        return cls(
            since={str(k): float(v) for k, v in (data.get("since") or {}).items()},
            last_change=data.get("last_change"),
            last_desired=data.get("last_desired"),
            peaks={str(k): float(v) for k, v in (data.get("peaks") or {}).items()},
            learned={str(k): float(v) for k, v in (data.get("learned") or {}).items()},
            core=CoreState.from_dict(data["core"]) if data.get("core") else None,
        )

    def with_condition(self, name: str, active: bool, now: float) -> PolicyState:
        """Start (or keep) the clock of a condition while it holds; clear it when it breaks."""
        since = dict(self.since)
        if active:
            since.setdefault(name, now)
        else:
            since.pop(name, None)
        return replace(self, since=since)

    def held_for(self, name: str, now: float) -> float:
        """Seconds the condition has held continuously (0 if it does not hold)."""
        start = self.since.get(name)
        return 0.0 if start is None else now - start

    def with_peak(self, name: str, value: float | None) -> PolicyState:
        """Raise the running peak of ``name`` to ``value``; ``None`` clears it (its window ended)."""
        peaks = dict(self.peaks)
        if value is None:
            peaks.pop(name, None)
        else:
            peaks[name] = max(value, peaks.get(name, value))
        return replace(self, peaks=peaks)

    def restart(self, name: str, now: float) -> PolicyState:
        """Restart a condition's clock and forget its peak (after acting on it)."""
        since = dict(self.since)
        since[name] = now
        peaks = dict(self.peaks)
        peaks.pop(name, None)
        return replace(self, since=since, peaks=peaks)


@dataclass(frozen=True, slots=True)
class PolicyInput:
    now: float  # epoch seconds, from the injected clock
    signals: Signals
    current: int  # instances counted toward the tier (provisioning + bootstrapping + ready)
    state: PolicyState
    booting: int = 0  # of ``current``, instances not serving yet (their capacity is on its way)
    # Load one instance carries at the TTFT target before anything is learned (KV-cache math, `scalectl
    # plan`); None when the tier has no serving model to size (then the policy's own figures decide).
    capacity_prior: float | None = None
    # Tokens per second (prompt prefilled + generated) one instance computes, from the engine model (`scalectl
    # plan`: 2 x active params FLOPs per token at the GPU's effective peak); None when it cannot be sized.
    compute_prior: float | None = None
    # Measured create→ready time of the tier's recent launches (high percentile); None: none measured yet.
    boot_time: float | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    desired: int
    reason: str
    state: PolicyState
    # Recorded with the decision (the request rate the policy saw, for the dashboards and the shadow report).
    demand: float | None = None


@dataclass(frozen=True, slots=True)
class Bounds:
    """Hard limits applied after every policy: tier min/max and the $/hour budget."""

    min: int
    max: int
    budget_per_hour: float | None = None
    price_per_instance_hour: float | None = None
