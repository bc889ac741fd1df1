"""Request traces, read in place: Azure LLM inference CSV and Mooncake JSONL.

Azure: ``TIMESTAMP,ContextTokens,GeneratedTokens`` with absolute timestamps (seven fractional digits).
Mooncake: one JSON object per line, ``timestamp`` (ms from the start), ``input_length``, ``output_length``
and ``hash_ids`` (one id per 512-token prompt block; an id seen before is a shared prefix, i.e. a prefix-cache
hit if the same instance still holds it — we assume it does, which is an upper bound on reuse).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np

from scalectl.simulator.requests import FloatArray

MOONCAKE_BLOCK_TOKENS = 512
TraceFormat = Literal["auto", "azure", "mooncake"]


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file, the line and what was expected."""


@dataclass(frozen=True, slots=True)
class Trace:
    """Arrival offsets (seconds from the first request, sorted) and token counts."""

    path: str
    t: FloatArray
    n_in: FloatArray
    n_out: FloatArray
    n_cached: FloatArray

    def __len__(self) -> int:
        return int(self.t.shape[0])

    @property
    def span_s(self) -> float:
        return float(self.t[-1] - self.t[0]) if len(self) else 0.0


def detect_format(path: Path) -> Literal["azure", "mooncake"]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "azure"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "mooncake"
    raise TraceError(f"{path}: cannot tell the trace format from the extension; set `format: azure` or `mooncake`")


def read_trace(path: str | Path, fmt: TraceFormat = "auto") -> Trace:
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: trace file not found (paths are relative to the workload file)")
    kind = detect_format(p) if fmt == "auto" else fmt
    stat = p.stat()
    return _read_cached(str(p.resolve()), kind, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _read_cached(path: str, kind: str, _mtime: int, _size: int) -> Trace:
    return read_azure_csv(path) if kind == "azure" else read_mooncake_jsonl(path)


def _positive_int(text: str, path: str, line: int, column: str) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise TraceError(f"{path}: line {line}: {column}: expected a whole number, got {text!r}") from None
    if value < 0:
        raise TraceError(f"{path}: line {line}: {column}: expected a non-negative number, got {value}")
    return value


def read_azure_csv(path: str | Path) -> Trace:
    name = str(path)
    times: list[float] = []
    n_in: list[int] = []
    n_out: list[int] = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        expected = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]
        if header is None or [h.strip() for h in header] != expected:
            raise TraceError(f"{name}: line 1: expected the header {','.join(expected)}, got {header!r}")
        for row in reader:
            line = reader.line_num
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != 3:
                raise TraceError(f"{name}: line {line}: expected 3 comma-separated fields, got {len(row)}")
            try:
                stamp = datetime.fromisoformat(row[0].strip())
            except ValueError:
                raise TraceError(
                    f'{name}: line {line}: TIMESTAMP: expected a time like "2023-11-16 18:15:46.6805900", '
                    f"got {row[0]!r}"
                ) from None
            times.append(stamp.timestamp() if stamp.tzinfo else (stamp - datetime(1970, 1, 1)).total_seconds())
            n_in.append(_positive_int(row[1], name, line, "ContextTokens"))
            n_out.append(_positive_int(row[2], name, line, "GeneratedTokens"))
    if not times:
        raise TraceError(f"{name}: the trace has no requests")
    return _build(name, times, n_in, n_out, [0] * len(times))


def read_mooncake_jsonl(path: str | Path) -> Trace:
    name = str(path)
    times: list[float] = []
    n_in: list[int] = []
    n_out: list[int] = []
    cached: list[int] = []
    seen: set[int] = set()
    with open(path, encoding="utf-8") as fh:
        for line, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{name}: line {line}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise TraceError(f"{name}: line {line}: expected a JSON object, got {type(row).__name__}")
            for key in ("timestamp", "input_length", "output_length"):
                if key not in row:
                    raise TraceError(f"{name}: line {line}: missing field {key!r}")
            stamp = row["timestamp"]
            if not isinstance(stamp, int | float) or isinstance(stamp, bool) or stamp < 0:
                raise TraceError(f"{name}: line {line}: timestamp: expected milliseconds >= 0, got {stamp!r}")
            prompt = _positive_int(row["input_length"], name, line, "input_length")
            times.append(float(stamp) / 1000.0)
            n_in.append(prompt)
            n_out.append(_positive_int(row["output_length"], name, line, "output_length"))
            blocks = row.get("hash_ids") or []
            if not isinstance(blocks, list):
                raise TraceError(f"{name}: line {line}: hash_ids: expected a list of block ids")
            hits = 0
            for block in blocks:  # a prefix: stop at the first block nobody computed before
                if block not in seen:
                    break
                hits += 1
            seen.update(blocks)
            cached.append(min(hits * MOONCAKE_BLOCK_TOKENS, max(prompt - 1, 0)))
    if not times:
        raise TraceError(f"{name}: the trace has no requests")
    return _build(name, times, n_in, n_out, cached)


def _build(name: str, times: list[float], n_in: list[int], n_out: list[int], cached: list[int]) -> Trace:
    t = np.asarray(times, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t = t[order] - t[order][0]
    return Trace(
        path=name,
        t=t,
        n_in=np.asarray(n_in, dtype=np.float64)[order],
        n_out=np.asarray(n_out, dtype=np.float64)[order],
        n_cached=np.asarray(cached, dtype=np.float64)[order],
    )


Replication = Literal["independent", "clumped"]


def replay(
    trace: Trace,
    *,
    duration_s: float,
    rate_scale: float,
    time_scale: float,
    repeat: int,
    offset_s: float,
    shape: Callable[[FloatArray], FloatArray] | None,
    rng: np.random.Generator,
    replication: Replication = "independent",
) -> tuple[FloatArray, np.ndarray]:
    """Arrival times (virtual seconds) and row indices of ``trace`` replayed as configured.

    ``time_scale`` stretches time (2 = half the rate, same requests); ``repeat`` tiles the trace back to back
    (0 = as often as needed to fill ``duration_s``); ``rate_scale`` × ``shape(t)`` thins (< 1) or replicates
    (> 1) the trace. ``replication`` says how copies are made: ``independent`` (see ``_independent``) or
    ``clumped`` (each request drawn several times within one mean gap of itself; the form before 2026-05,
    kept to reproduce old results: it makes per-second counts far burstier than the same number of users).
    """
    n = len(trace)
    gap = trace.span_s / max(n - 1, 1)
    period = (trace.span_s + gap) * time_scale
    tiles = repeat if repeat > 0 else max(1, int(np.ceil(max(duration_s - offset_s, 0.0) / period)))
    if replication == "clumped":
        t, rows = _clumped(trace.t * time_scale, n, period, tiles, offset_s, rate_scale, shape, gap * time_scale, rng)
    else:
        t, rows = _independent(trace.t * time_scale, n, period, tiles, offset_s, rate_scale, shape, rng)
    keep = (t >= 0) & (t < duration_s)
    t, rows = t[keep], rows[keep]
    order = np.argsort(t, kind="stable")
    return t[order], rows[order]


def _tiled(times: FloatArray, n: int, period: float, tiles: int, offset_s: float) -> tuple[FloatArray, np.ndarray]:
    base = np.concatenate([times + k * period for k in range(tiles)]) + offset_s
    return base, np.tile(np.arange(n), tiles)


def _independent(
    times: FloatArray,
    n: int,
    period: float,
    tiles: int,
    offset_s: float,
    rate_scale: float,
    shape: Callable[[FloatArray], FloatArray] | None,
    rng: np.random.Generator,
) -> tuple[FloatArray, np.ndarray]:
    """Copy ``j`` is the trace shifted by its own random offset, circularly within one period (the first
    copy is the trace as recorded), and keeps each of its requests with probability ``clip(m(t) - j, 0, 1)``
    where ``m = rate_scale × shape``: ×2.5 is two whole copies and a third thinned to half.

    Shifted copies rather than Poisson draws from the trace's rate curve: each copy keeps the trace's own
    burstiness (its second-scale bursts and lulls), and copies at independent offsets superpose as that
    many independent streams of users do — counts per second vary like k streams, not like one stream × k.
    """
    parts_t, parts_rows = [], []
    j, copies, shift = 0, 1, 0.0
    while j < copies:  # how many copies: the highest multiplier any copy's requests see, rounded up
        shifted = np.mod(times + shift, period)
        order = np.argsort(shifted, kind="stable")
        base, rows = _tiled(shifted[order], n, period, tiles, offset_s)
        rows = order[rows]
        scale = np.full(base.shape, rate_scale) if shape is None else rate_scale * shape(base)
        copies = max(copies, int(np.ceil(float(scale.max(initial=0.0)) - 1e-9)))
        keep = rng.random(base.shape[0]) < np.clip(scale - j, 0.0, 1.0)
        parts_t.append(base[keep])
        parts_rows.append(rows[keep])
        j, shift = j + 1, float(rng.uniform(0.0, period))
    return np.concatenate(parts_t), np.concatenate(parts_rows)


def _clumped(
    times: FloatArray,
    n: int,
    period: float,
    tiles: int,
    offset_s: float,
    rate_scale: float,
    shape: Callable[[FloatArray], FloatArray] | None,
    jitter_s: float,
    rng: np.random.Generator,
) -> tuple[FloatArray, np.ndarray]:
    """Each request drawn ``floor(m)`` or ``ceil(m)`` times (``m = rate_scale × shape``), the copies after the
    first jittered within ``jitter_s`` (one mean gap) of it."""
    base, rows = _tiled(times, n, period, tiles, offset_s)
    scale = np.full(base.shape, rate_scale) if shape is None else rate_scale * shape(base)
    whole = np.floor(scale).astype(np.int64)
    counts = whole + (rng.random(base.shape[0]) < (scale - whole))
    t = np.repeat(base, counts)
    rows = np.repeat(rows, counts)
    # Second and later copies of a row get a jitter; the first keeps its recorded time.
    starts = np.cumsum(counts) - counts
    rank = np.arange(t.shape[0]) - np.repeat(starts, counts)
    first_copy = rank == 0
    return np.where(first_copy, t, t + rng.random(t.shape[0]) * jitter_s), rows
