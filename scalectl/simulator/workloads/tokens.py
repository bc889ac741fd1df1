"""Token-count distributions for synthetic requests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalectl.simulator.requests import IntArray


@dataclass(frozen=True, slots=True)
class TokenDist:
    """Lognormal with the given mean and coefficient of variation (cv 0 = always ``mean``), clipped."""

    mean: float
    cv: float = 0.0
    min: int = 1
    max: int | None = None

    def sample(self, rng: np.random.Generator, n: int) -> IntArray:
        if self.cv <= 0:
            values = np.full(n, self.mean)
        else:
            sigma2 = np.log1p(self.cv**2)
            values = self.mean * np.exp(np.sqrt(sigma2) * rng.standard_normal(n) - sigma2 / 2)
        hi = self.max if self.max is not None else np.inf
        return np.clip(np.rint(values), self.min, hi).astype(np.int64)
