"""Per-tier figures over a sliding window of ``/metrics`` snapshots from every endpoint. Pure: the caller
feeds snapshots and says which endpoints answered this tick; nothing here does I/O or reads a clock."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from scalectl.sources.histograms import counter_increase, histogram_increase, histogram_quantile, merge
from scalectl.sources.vllm_snapshot import Histogram, VllmSnapshot


@dataclass(frozen=True, slots=True)
class VllmFigures:
    """A tier's vLLM figures; None = unknown (no endpoint answered, or nothing finished in the window)."""

    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_p99_s: float | None = None
    requests_waiting: float | None = None
    requests_running: float | None = None
    kv_cache_usage: float | None = None  # mean over endpoints
    kv_cache_usage_max: float | None = None
    prefix_cache_hit_rate: float | None = None
    preemptions: float | None = None  # in the window
    # Requests arriving per second over the window: finished + growth of what is running or waiting, so it
    # is the load even while a short fleet falls behind (finished alone would read its capacity).
    request_rate: float | None = None
    arrivals: float | None = None  # requests that arrived between the last two scrapes
    finish_rate: float | None = None  # requests finished per second over the window
    prompt_tokens_rate: float | None = None  # tokens per second over the window
    generation_tokens_rate: float | None = None
    endpoints_answering: int = 0
    window_s: float | None = None  # the time the windowed figures actually span


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


class VllmWindow:
    """Keeps each endpoint's recent snapshots: every one inside ``window`` plus the newest one before it
    (the baseline, so two reads ``window`` apart always make a pair)."""

    def __init__(self, window: float):
        self.window = window
        self._history: dict[str, list[VllmSnapshot]] = {}

    def add(self, endpoint: str, snapshot: VllmSnapshot) -> None:
        history = self._history.setdefault(endpoint, [])
        history.append(snapshot)
        start = snapshot.read_at - self.window
        baseline = 0
        for i, s in enumerate(history):
            if s.read_at <= start:
                baseline = i
        del history[:baseline]

    def forget_except(self, endpoints: Iterable[str]) -> None:
        """Drop the history of endpoints that left the tier."""
        keep = set(endpoints)
        for endpoint in [e for e in self._history if e not in keep]:
            del self._history[endpoint]

    def history(self, endpoint: str) -> Sequence[VllmSnapshot]:
        return self._history.get(endpoint, ())

    def figures(self, answering: Sequence[str]) -> VllmFigures:
        """Figures from the endpoints that answered this tick (the others are left out, not counted as 0)."""
        histories = [self._history[e] for e in answering if self._history.get(e)]
        if not histories:
            return VllmFigures()
        latest = [h[-1] for h in histories]
        kv = [s.kv_usage for s in latest if s.kv_usage is not None]
        kv_max = [s.kv_usage_max for s in latest if s.kv_usage_max is not None]

        ttft_increases = [
            inc for h in histories if (inc := histogram_increase([s.ttft for s in h if s.ttft is not None]))
        ]
        ttft = merge(ttft_increases)
        finished = ttft is not None and ttft.count > 0
        spans = [h[-1].read_at - h[0].read_at for h in histories if len(h) >= 2]

        return VllmFigures(
            ttft_p50_s=histogram_quantile(0.50, ttft) if finished else None,
            ttft_p95_s=histogram_quantile(0.95, ttft) if finished else None,
            ttft_p99_s=histogram_quantile(0.99, ttft) if finished else None,
            requests_waiting=_sum(s.waiting for s in latest),
            requests_running=_sum(s.running for s in latest),
            kv_cache_usage=sum(kv) / len(kv) if kv else None,
            kv_cache_usage_max=max(kv_max) if kv_max else None,
            prefix_cache_hit_rate=_prefix_hit_rate(histories),
            preemptions=_sum(_increase(h, lambda s: s.preemptions) for h in histories),
            request_rate=_sum(_rate(h) for h in histories),
            arrivals=_arrivals_over_one_interval(histories),
            finish_rate=_sum(_counter_rate(h, _finished_count) for h in histories),
            prompt_tokens_rate=_sum(_counter_rate(h, lambda s: s.prompt_tokens) for h in histories),
            generation_tokens_rate=_sum(_counter_rate(h, lambda s: s.generation_tokens) for h in histories),
            endpoints_answering=len(histories),
            window_s=max(spans) if spans else None,
        )


def _increase(history: Sequence[VllmSnapshot], field: Callable[[VllmSnapshot], float | None]) -> float | None:
    values = [v for s in history if (v := field(s)) is not None]
    return counter_increase(values) if len(values) >= 2 else None


def _finished_count(s: VllmSnapshot) -> float | None:
    """Requests finished so far: the success counter, else the e2e histogram's count."""
    if s.successes is not None:
        return s.successes
    e2e: Histogram | None = s.e2e
    return e2e.count if e2e is not None else None


def _rate(history: Sequence[VllmSnapshot]) -> float | None:
    """Arrivals per second over the window: finished + growth of running + waiting, over the span."""
    if len(history) < 2 or history[-1].read_at <= history[0].read_at:
        return None
    finished = _increase(history, _finished_count)
    if finished is None:
        return None
    first, last = history[0], history[-1]
    growth = 0.0
    if None not in (first.waiting, first.running, last.waiting, last.running):
        growth = (last.waiting or 0) + (last.running or 0) - (first.waiting or 0) - (first.running or 0)
    return max(0.0, finished + growth) / (last.read_at - first.read_at)


def _counter_rate(history: Sequence[VllmSnapshot], field: Callable[[VllmSnapshot], float | None]) -> float | None:
    if len(history) < 2 or history[-1].read_at <= history[0].read_at:
        return None
    increase = _increase(history, field)
    return None if increase is None else increase / (history[-1].read_at - history[0].read_at)


def _arrivals(history: Sequence[VllmSnapshot]) -> float | None:
    """Arrived between the last two scrapes = finished in between + growth of what is queued or running."""
    if len(history) < 2:
        return None
    before, after = history[-2], history[-1]
    finished = _increase([before, after], _finished_count)
    if finished is None or None in (before.waiting, before.running, after.waiting, after.running):
        return None
    in_system_growth = (after.waiting or 0) + (after.running or 0) - (before.waiting or 0) - (before.running or 0)
    return max(0.0, finished + in_system_growth)


def _arrivals_over_one_interval(histories: Sequence[Sequence[VllmSnapshot]]) -> float | None:
    """Arrivals over the last scrape interval, summed over the endpoints. An endpoint whose previous scrape
    was missed counts over two intervals or more: it counts at its rate over that span, times the
    shortest last interval among the endpoints (one tick's), so that a missed scrape reads as what it is,
    not as a burst (policies/burst.py sizes for a tick's arrivals)."""
    counted = [
        (arrived, h[-1].read_at - h[-2].read_at)
        for h in histories
        if len(h) >= 2 and (arrived := _arrivals(h)) is not None
    ]
    spans = [span for _, span in counted if span > 0]
    if not spans:
        return None
    one = min(spans)  # endpoints with no count yet (one scrape) are left out, as by the other figures
    return sum(arrived * one / span if span > 0 else arrived for arrived, span in counted)


def _prefix_hit_rate(histories: Sequence[Sequence[VllmSnapshot]]) -> float | None:
    hits = _sum(_increase(h, lambda s: s.prefix_hits) for h in histories)
    queries = _sum(_increase(h, lambda s: s.prefix_queries) for h in histories)
    if hits is not None and queries:
        return hits / queries
    gauges = [h[-1].prefix_hit_rate for h in histories if h[-1].prefix_hit_rate is not None]
    return sum(gauges) / len(gauges) if gauges else None
