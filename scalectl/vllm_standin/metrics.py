"""The stand-in's metric state and its ``/metrics`` rendering.

Rendering goes through prometheus_client's own text writer (``generate_latest``), the same code vLLM's
``/metrics`` uses, so the bytes have vLLM's exact layout: ``# HELP``/``# TYPE`` lines, ``_total`` counter
names, sorted labels, ``_created`` series as separate gauges (new generation only).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString

from scalectl.vllm_standin.catalogue import FINISH_REASONS, Generation, MetricDef, catalogue, label_names


@dataclass(slots=True)
class HistogramState:
    bounds: tuple[float, ...]  # finite upper bounds; +Inf is implied
    counts: list[float]  # per bucket (not cumulative), len(bounds) + 1
    total: float = 0.0

    @classmethod
    def empty(cls, bounds: tuple[float, ...]) -> HistogramState:
        return cls(bounds, [0.0] * (len(bounds) + 1))

    def observe(self, value: float) -> None:
        # prometheus_client puts a value equal to a bound into that bound's bucket (le is inclusive).
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value


@dataclass
class MetricsState:
    """Everything ``/metrics`` shows. The engine writes it under ``lock``; ``version`` moves on every write."""

    generation: Generation
    model: str
    max_model_len: int
    created_at: float
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    successes: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, HistogramState] = field(default_factory=dict)
    version: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.reset(self.created_at)

    @property
    def definitions(self) -> tuple[MetricDef, ...]:
        return catalogue(self.generation, self.max_model_len)

    def reset(self, now: float) -> None:
        """Zero every counter and histogram, as a restarted vLLM process would."""
        with self.lock:
            self.created_at = now
            for d in self.definitions:
                if d.kind == "gauge":
                    self.gauges[d.key] = 0.0
                elif d.kind == "counter" and d.extra_label is None:
                    self.counters[d.key] = 0.0
                elif d.kind == "histogram":
                    self.histograms[d.key] = HistogramState.empty(d.buckets)
            self.successes = dict.fromkeys(FINISH_REASONS, 0.0)
            self.version += 1

    def bump(self) -> None:
        self.version += 1


class _VllmCollector:
    def __init__(self, state: MetricsState):
        self._state = state

    def collect(self) -> Iterator[Metric]:
        s = self._state
        base = {"model_name": s.model, "engine": "0"} if s.generation == "new" else {"model_name": s.model}
        base = {k: base[k] for k in label_names(s.generation)}
        with_created = s.generation == "new"
        with s.lock:
            for d in s.definitions:
                metric = Metric(d.name, d.help, d.kind)
                if d.kind == "gauge":
                    metric.add_sample(d.name, base, s.gauges.get(d.key, 0.0))
                elif d.kind == "counter" and d.extra_label:
                    for reason, value in s.successes.items():
                        metric.add_sample(d.name + "_total", {**base, d.extra_label: reason}, value)
                    if with_created:
                        for reason in s.successes:
                            metric.add_sample(d.name + "_created", {**base, d.extra_label: reason}, s.created_at)
                elif d.kind == "counter":
                    metric.add_sample(d.name + "_total", base, s.counters.get(d.key, 0.0))
                    if with_created:
                        metric.add_sample(d.name + "_created", base, s.created_at)
                else:
                    h = s.histograms[d.key]
                    cumulative = 0.0
                    for bound, count in zip((*h.bounds, float("inf")), h.counts, strict=True):
                        cumulative += count
                        metric.add_sample(d.name + "_bucket", {**base, "le": floatToGoString(bound)}, cumulative)
                    metric.add_sample(d.name + "_count", base, cumulative)
                    metric.add_sample(d.name + "_sum", base, h.total)
                    if with_created:
                        metric.add_sample(d.name + "_created", base, s.created_at)
                yield metric


class MetricsRenderer:
    """Renders ``/metrics`` text, re-rendering only when the state moved (cheap when idle)."""

    def __init__(self, state: MetricsState, *, process_metrics: bool = True):
        self._state = state
        self._registry = CollectorRegistry(auto_describe=False)
        if process_metrics:  # a real vLLM server also shows the Python runtime's metrics
            GCCollector(registry=self._registry)
            PlatformCollector(registry=self._registry)
            ProcessCollector(registry=self._registry)
        self._registry.register(_VllmCollector(state))  # type: ignore[arg-type]
        self._cached: tuple[int, bytes] | None = None

    def render(self) -> bytes:
        version = self._state.version
        if self._cached is not None and self._cached[0] == version:
            return self._cached[1]
        body = generate_latest(self._registry)
        self._cached = (version, body)
        return body
