"""A fine log-bucketed latency histogram for sliding-window quantiles (2% resolution, like a dense
Prometheus histogram). Adding and removing a tick's counts is cheap; so is reading a quantile."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scalectl.simulator.requests import FloatArray

_LOW_S = 1e-3
_RATIO = 1.02
_BINS = int(np.ceil(np.log(1e6) / np.log(_RATIO))) + 2  # 1 ms .. 1000 s, plus under/overflow
_LOG_RATIO = float(np.log(_RATIO))


class LatencyHistogram:
    def __init__(self) -> None:
        self._counts = np.zeros(_BINS, dtype=np.int64)
        self._total = 0

    @staticmethod
    def counts(values: FloatArray) -> np.ndarray:
        """Bucket counts for ``values`` (seconds), to ``add`` now and ``remove`` when they leave the window."""
        if not values.shape[0]:
            return np.zeros(_BINS, dtype=np.int64)
        idx = np.floor(np.log(np.maximum(values, _LOW_S * 0.5) / _LOW_S) / _LOG_RATIO).astype(np.int64) + 1
        return np.bincount(np.clip(idx, 0, _BINS - 1), minlength=_BINS)

    def add(self, counts: np.ndarray) -> None:
        self._counts += counts
        self._total += int(counts.sum())

    def remove(self, counts: np.ndarray) -> None:
        self._counts -= counts
        self._total -= int(counts.sum())

    def copy(self) -> LatencyHistogram:
        twin = LatencyHistogram()
        twin._counts, twin._total = self._counts.copy(), self._total
        return twin

    def plus(self, other: LatencyHistogram) -> LatencyHistogram:
        """Both windows' samples in one histogram (a tier's variants each keep their own)."""
        twin = self.copy()
        twin._counts += other._counts
        twin._total += other._total
        return twin

    @property
    def total(self) -> int:
        return self._total

    def quantiles(self, qs: Sequence[float]) -> list[float] | None:
        """Quantiles (bucket geometric midpoints, seconds), or None when the window holds no sample."""
        if self._total <= 0:
            return None
        cum = np.cumsum(self._counts)
        ranks = np.ceil(np.asarray(qs) * self._total).clip(1, self._total)
        bins = np.searchsorted(cum, ranks)
        return [float(_LOW_S * _RATIO ** (b - 0.5)) if b > 0 else _LOW_S for b in bins.tolist()]
