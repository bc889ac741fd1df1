"""Reading vLLM's ``/metrics`` text into a :class:`VllmSnapshot`.

Two readers feed the same sample builder:

* :func:`parse_vllm_metrics` — the fast path the daemon uses. It pulls out only the few dozen lines we need
  with one regular-expression scan, then parses those lines strictly. A 30–60 KB vLLM response takes a small
  fraction of the time prometheus_client's full parser needs, which is what lets one process read thousands
  of servers per tick.
* :func:`parse_vllm_metrics_reference` — prometheus_client's ``text_string_to_metric_families``. Tests prove
  the two give identical snapshots on recorded texts.

The fast path validates the lines it reads, not the lines it skips: garbage in an unrelated metric passes,
garbage in a metric we use is an error.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scalectl.sources.vllm_snapshot import Histogram, VllmSnapshot


class ExpositionError(ValueError):
    """The text is not usable Prometheus exposition for a vLLM server."""


_GAUGES = {
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_requests_running": "running",
    "vllm:kv_cache_usage_perc": "kv_new",
    "vllm:gpu_cache_usage_perc": "kv_old",
    "vllm:gpu_prefix_cache_hit_rate": "prefix_hit_rate",
}
_COUNTERS = {
    "vllm:prefix_cache_queries_total": "prefix_queries",
    "vllm:prefix_cache_hits_total": "prefix_hits",
    "vllm:gpu_prefix_cache_queries_total": "prefix_queries_09",  # vLLM 0.8–0.9 names
    "vllm:gpu_prefix_cache_hits_total": "prefix_hits_09",
    "vllm:num_preemptions_total": "preemptions",
    "vllm:request_success_total": "successes",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
}
_HISTOGRAMS = {"vllm:time_to_first_token_seconds": "ttft", "vllm:e2e_request_latency_seconds": "e2e"}
_HISTOGRAM_SAMPLES = {
    f"{name}{suffix}": (key, suffix) for name, key in _HISTOGRAMS.items() for suffix in ("_bucket", "_sum")
}
# Labels that identify a series of the figure itself; any other label marks a breakdown we must not add in.
_IDENTITY_LABELS = frozenset({"model_name", "engine", "le", "finished_reason"})

WANTED_SAMPLES = frozenset(_GAUGES) | frozenset(_COUNTERS) | frozenset(_HISTOGRAM_SAMPLES)

_WANTED_ORDER = tuple(sorted(WANTED_SAMPLES))
# A wanted name at the start of a line, followed by its labels or a blank (a longer name sharing the prefix
# is not it); longest names first, so that no name stops inside another. The newline before it is a literal
# the scan jumps between (``_FIRST_LINE`` reads the text's first line, which has none).
_NAMES = "|".join(re.escape(n) for n in sorted(WANTED_SAMPLES, key=len, reverse=True))
_SAMPLE_LINE = re.compile(rf"\n(({_NAMES})[{{ \t][^\n]*)")
_FIRST_LINE = re.compile(rf"(({_NAMES})[{{ \t][^\n]*)")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(?:,|$)')
_ESCAPE = re.compile(r"\\[\\\"n]")
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True, slots=True)
class _Labels:
    """What a sample's labels mean to us, worked out once per distinct label text."""

    own: bool  # only identity labels: the series is the figure itself, not a breakdown
    le: str | None  # the raw le label of a bucket
    series: tuple[tuple[str, str], ...]  # identity of the series apart from le

    @classmethod
    def of(cls, labels: Mapping[str, str]) -> _Labels:
        return cls(
            own=_IDENTITY_LABELS.issuperset(labels),
            le=labels.get("le"),
            series=tuple(sorted((k, v) for k, v in labels.items() if k != "le")),
        )


_NO_LABELS = _Labels(own=True, le=None, series=())


def _parse_labels(text: str, line: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            if text[pos:].strip(" ,") == "":
                break
            raise ExpositionError(f"malformed labels in line {line[:120]!r}")
        value = m.group(2)
        if "\\" in value:
            value = _ESCAPE.sub(lambda e: _ESCAPES[e.group(0)], value)
        labels[m.group(1)] = value
        pos = m.end()
    return labels


def _parse_value(text: str, line: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ExpositionError(f"bad sample value {text!r} in line {line[:120]!r}") from None


def _wanted_lines(text: str) -> Iterable[tuple[str, str]]:
    """(name, line) for every sample line we read, by name (in ``_WANTED_ORDER``), then in text order. One
    regular-expression scan finds them all: every line of a name, not only its first run (prometheus_client
    writes a histogram's series one after another, each with its own ``_count`` and ``_sum`` between)."""
    found: dict[str, list[str]] = {}
    first = _FIRST_LINE.match(text)
    for match in itertools.chain((first,) if first else (), _SAMPLE_LINE.finditer(text)):
        line, name = match.groups()
        found.setdefault(name, []).append(line)
    for name in _WANTED_ORDER:
        for line in found.get(name, ()):
            yield name, line


class _LabelCache:
    """Label texts repeat across scrapes and servers (same model, engine, le): parse each one once."""

    def __init__(self, limit: int = 50_000):
        self._limit = limit
        self._parsed: dict[str, _Labels] = {}

    def get(self, raw: str, line: str) -> _Labels:
        found = self._parsed.get(raw)
        if found is None:
            if len(self._parsed) >= self._limit:
                self._parsed.clear()
            found = self._parsed[raw] = _Labels.of(_parse_labels(raw, line))
        return found


_CACHE = _LabelCache()


def _fast_samples(text: str) -> Iterable[tuple[str, _Labels, float]]:
    cache = _CACHE
    for name, line in _wanted_lines(text):
        n = len(name)
        if line[n] == "{":
            close = line.rfind("}")
            if close == -1:
                raise ExpositionError(f"malformed sample line {line[:120]!r}")
            labels = cache.get(line[n + 1 : close], line)
            rest = line[close + 1 :].split()
        else:
            labels = _NO_LABELS
            rest = line[n:].split()
        if not 1 <= len(rest) <= 2 or (len(rest) == 2 and not rest[1].lstrip("-").isdigit()):
            raise ExpositionError(f"malformed sample line {line[:120]!r}")
        yield name, labels, _parse_value(rest[0], line)


def _reference_samples(text: str) -> Iterable[tuple[str, _Labels, float]]:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in WANTED_SAMPLES:
                    yield sample.name, _Labels.of(sample.labels), float(sample.value)
    except ExpositionError:
        raise
    except Exception as exc:  # the parser raises ValueError, IndexError, … on bad input
        raise ExpositionError(f"prometheus text parser: {exc}") from None


@dataclass
class _Builder:
    """Adds samples up per figure, then checks them into a snapshot."""

    read_at: float
    sums: dict[str, float] = field(default_factory=dict)
    kv: dict[str, list[float]] = field(default_factory=dict)
    buckets: dict[tuple[str, tuple[tuple[str, str], ...]], dict[float, float]] = field(default_factory=dict)
    hist_sums: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    bad: set[str] = field(default_factory=set)
    seen: int = 0

    def add(self, name: str, labels: _Labels, value: float) -> None:
        self.seen += 1
        if not labels.own:
            return  # a breakdown (e.g. by reason) of a figure whose total is another series
        finite = value == value and value not in (math.inf, -math.inf)
        if name in _GAUGES:
            key = _GAUGES[name]
            if not finite:
                self._refuse(key, f"{name} is {value}")
            elif key.startswith("kv_"):
                self.kv.setdefault(key, []).append(value)
            else:
                self.sums[key] = self.sums.get(key, 0.0) + value
            return
        if name in _COUNTERS:
            key = _COUNTERS[name]
        else:
            key, suffix = _HISTOGRAM_SAMPLES[name]
        if not finite or value < 0:
            self._refuse(key, f"{name} is {value}")
        elif name in _COUNTERS:
            self.sums[key] = self.sums.get(key, 0.0) + value
        elif suffix == "_sum":
            self.hist_sums[key] = self.hist_sums.get(key, 0.0) + value
        elif labels.le is None:
            self._refuse(key, f"{name} sample without an le label")
        else:
            try:
                le = float(labels.le)
            except ValueError:
                self._refuse(key, f"{name} has a bad le={labels.le!r}")
                return
            self.buckets.setdefault((key, labels.series), {})[le] = value

    def _refuse(self, key: str, why: str) -> None:
        self.bad.add(key)
        self.problems.append(why)

    def _histogram(self, key: str, metric: str) -> Histogram | None:
        if key in self.bad:
            return None
        series = [b for (k, _), b in self.buckets.items() if k == key]
        if not series:
            return None
        common: set[float] | None = None
        for b in series:
            if math.inf not in b:
                self.problems.append(f"{metric} has no +Inf bucket")
                return None
            bounds = sorted(b)
            counts = [b[x] for x in bounds]
            if any(later < earlier for earlier, later in itertools.pairwise(counts)):
                self.problems.append(f"{metric} buckets are not cumulative (a count goes down)")
                return None
            common = set(bounds) if common is None else common & set(bounds)
        shared = tuple(sorted(common or ()))
        if len(series) == 1:  # one engine (the usual server): its counts, as the sum of one would give them
            only = series[0]
            cumulative = tuple(0.0 + only[x] for x in shared)
        else:
            cumulative = tuple(sum(b[x] for b in series) for x in shared)
        return Histogram(shared, cumulative, self.hist_sums.get(key))

    def build(self) -> VllmSnapshot:
        def get(key: str) -> float | None:
            return None if key in self.bad else self.sums.get(key)

        kv_key = "kv_new" if "kv_new" in self.kv or "kv_new" in self.bad else "kv_old"
        kv_values = None if kv_key in self.bad else self.kv.get(kv_key)
        generation = "new" if kv_key == "kv_new" and kv_key in self.kv else "old" if "kv_old" in self.kv else "unknown"
        queries, hits = get("prefix_queries"), get("prefix_hits")
        if queries is None and hits is None:
            queries, hits = get("prefix_queries_09"), get("prefix_hits_09")
        return VllmSnapshot(
            read_at=self.read_at,
            waiting=get("waiting"),
            running=get("running"),
            kv_usage=sum(kv_values) / len(kv_values) if kv_values else None,
            kv_usage_max=max(kv_values) if kv_values else None,
            prefix_queries=queries,
            prefix_hits=hits,
            prefix_hit_rate=get("prefix_hit_rate"),
            preemptions=get("preemptions"),
            successes=get("successes"),
            prompt_tokens=get("prompt_tokens"),
            generation_tokens=get("generation_tokens"),
            ttft=self._histogram("ttft", "vllm:time_to_first_token_seconds"),
            e2e=self._histogram("e2e", "vllm:e2e_request_latency_seconds"),
            generation=generation,
            problems=tuple(self.problems),
        )


def _build(samples: Iterable[tuple[str, _Labels, float]], read_at: float) -> VllmSnapshot:
    builder = _Builder(read_at)
    for name, labels, value in samples:
        builder.add(name, labels, value)
    if builder.seen == 0:
        raise ExpositionError("no vllm: metrics in the response (is this a vLLM server's /metrics?)")
    return builder.build()


def parse_vllm_metrics(text: str, read_at: float) -> VllmSnapshot:
    """Fast path. Raises :class:`ExpositionError` for text we cannot use at all."""
    return _build(_fast_samples(text), read_at)


def parse_vllm_metrics_reference(text: str, read_at: float) -> VllmSnapshot:
    """prometheus_client's parser; the yardstick for the fast path."""
    return _build(_reference_samples(text), read_at)
