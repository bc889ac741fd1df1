"""Histogram arithmetic as Prometheus does it: deltas between scrapes with counter resets, merging across
instances, and ``histogram_quantile``'s linear interpolation inside a bucket. Pure functions."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from scalectl.sources.vllm_snapshot import Histogram


def counter_increase(values: Sequence[float]) -> float:
    """Increase over consecutive readings of a counter, like Prometheus' ``increase()`` without
    extrapolation: a drop means the process restarted, so the new value is the increase since then."""
    total = 0.0
    for before, after in itertools.pairwise(values):
        total += after - before if after >= before else after
    return total


def histogram_increase(readings: Sequence[Histogram]) -> Histogram | None:
    """Bucket-wise increase over consecutive readings of one server's histogram.

    A reset (any bucket going down) makes the newer reading itself the increase for that step, as
    ``rate()`` does; so does a change of bucket layout (a restart into another vLLM version). Never negative.
    """
    if len(readings) < 2:
        return None
    last = readings[-1]
    total = [0.0] * len(last.bounds)
    total_sum = 0.0
    for before, after in itertools.pairwise(readings):
        if after.bounds != last.bounds:
            continue  # an older layout: its observations predate the restart into the current one
        same_layout = before.bounds == after.bounds
        if same_layout and all(a >= b for a, b in zip(after.cumulative, before.cumulative, strict=True)):
            diffs = [a - b for a, b in zip(after.cumulative, before.cumulative, strict=True)]
            sum_diff = (after.sum or 0.0) - (before.sum or 0.0)
        else:
            diffs = list(after.cumulative)
            sum_diff = after.sum or 0.0
        total = [t + d for t, d in zip(total, diffs, strict=True)]
        total_sum += max(0.0, sum_diff)
    return Histogram(last.bounds, tuple(total), total_sum)


def merge(histograms: Sequence[Histogram]) -> Histogram | None:
    """Sum bucket counts across servers (``sum by (le)``), on the bounds every server has."""
    if not histograms:
        return None
    common = set(histograms[0].bounds)
    for h in histograms[1:]:
        common &= set(h.bounds)
    bounds = tuple(sorted(common))
    cumulative = [0.0] * len(bounds)
    total_sum = 0.0
    for h in histograms:
        at = h.on_bounds(bounds) if h.bounds != bounds else h
        cumulative = [c + x for c, x in zip(cumulative, at.cumulative, strict=True)]
        total_sum += h.sum or 0.0
    return Histogram(bounds, tuple(cumulative), total_sum)


def histogram_quantile(q: float, h: Histogram | None) -> float | None:
    """Prometheus' ``histogram_quantile``; None where Prometheus gives NaN (no observations)."""
    if h is None or not 0.0 <= q <= 1.0:
        return None
    total = h.cumulative[-1]
    if total <= 0 or math.isnan(total):
        return None
    rank = q * total
    index = next(i for i, c in enumerate(h.cumulative) if c >= rank)
    if index == len(h.bounds) - 1:  # in the +Inf bucket: the largest finite bound is all we know
        return h.bounds[-2] if len(h.bounds) >= 2 else None
    upper = h.bounds[index]
    if index == 0 and upper <= 0:
        return upper
    lower = 0.0 if index == 0 else h.bounds[index - 1]
    below = 0.0 if index == 0 else h.cumulative[index - 1]
    in_bucket = h.cumulative[index] - below
    if in_bucket <= 0:
        return upper
    return lower + (upper - lower) * (rank - below) / in_bucket
