"""What one scrape of one vLLM server's ``/metrics`` tells us: plain values, None when unknown."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts by upper bound (ascending, the last bound is +Inf), and the sum."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float | None = None

    @property
    def count(self) -> float:
        return self.cumulative[-1] if self.cumulative else 0.0

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.cumulative) or not self.bounds or not math.isinf(self.bounds[-1]):
            raise ValueError("a histogram needs one cumulative count per bound and a last +Inf bound")

    def on_bounds(self, bounds: tuple[float, ...]) -> Histogram:
        """The same histogram read at a subset of its bounds (cumulative counts stay exact)."""
        by_bound = dict(zip(self.bounds, self.cumulative, strict=True))
        return Histogram(bounds, tuple(by_bound[b] for b in bounds), self.sum)


@dataclass(frozen=True, slots=True)
class VllmSnapshot:
    """One endpoint at one moment. Gauges are summed over the server's engines (data-parallel ranks),
    except KV-cache usage (mean and max); counters and histograms are summed over engines too."""

    read_at: float
    waiting: float | None = None
    running: float | None = None
    kv_usage: float | None = None
    kv_usage_max: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    prefix_hit_rate: float | None = None  # the pre-0.9 gauge (vllm:gpu_prefix_cache_hit_rate)
    preemptions: float | None = None
    successes: float | None = None
    prompt_tokens: float | None = None  # counters: tokens prefilled / generated so far
    generation_tokens: float | None = None
    ttft: Histogram | None = None
    e2e: Histogram | None = None
    generation: str = "unknown"  # "new" (kv_cache_usage_perc) or "old" (gpu_cache_usage_perc)
    problems: tuple[str, ...] = field(default_factory=tuple)  # figures we refused to read, and why
