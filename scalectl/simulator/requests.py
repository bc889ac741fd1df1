"""Requests as rows of one float64 matrix, so a tick's worth of them moves through the model at once.

One matrix (not one array per field) because selecting, sorting and joining requests is what the model
does most: each is a single numpy call on the matrix instead of one per field. Integer fields (token
counts, session ids) are stored exactly as floats (exact up to 2**53).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# Columns. Times are virtual seconds since the simulation start.
T = 0  # when it reaches the load balancer (a retry arrives again, later)
ORIGIN = 1  # when the client first sent it: TTFT and end-to-end latency count from here
N_IN = 2
N_OUT = 3
N_CACHED = 4  # prompt tokens found in the prefix cache (no prefill compute)
SESSION = 5  # closed-loop session id, -1 for open-loop traffic
ROUND = 6  # index of this request within its session during the current tick (-1: from an earlier tick)
U = 7  # uniform 0-1: where in the current engine step the request lands
OVERHEAD = 8  # client-side seconds (HTTP, chat template, tokenisation, streaming) the engine never sees
RETRIES = 9
TTFT_DONE = 10  # 1 once the first token was delivered (a retry after that does not count TTFT again)
INST = 11  # instance slot it was routed to (-1: none yet)
ADMITTED = 12  # 1 while it holds a sequence slot (prefilling or decoding); 0 = vLLM "waiting"
FIRST = 13  # first-token time (NaN until admitted)
REMAINING = 14  # decode tokens still to generate after the first token, as of the last tick boundary
COLUMNS = 15


class Requests:
    """A set of requests (rows). Per-request random figures are drawn once, when the request is created,
    so re-simulating a tick gives the same answer for the same request."""

    __slots__ = ("data",)

    def __init__(self, data: FloatArray) -> None:
        self.data = data

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def col(self, c: int) -> FloatArray:
        return self.data[:, c]

    def icol(self, c: int) -> IntArray:
        return self.data[:, c].astype(np.int64)

    def take(self, index: npt.NDArray[np.integer] | npt.NDArray[np.bool_] | slice) -> Requests:
        return Requests(self.data[index])

    def sorted_by_time(self) -> Requests:
        """A copy, in arrival order (stable: equal times keep their order)."""
        t = self.data[:, T]
        if (t[1:] >= t[:-1]).all():  # the usual tick: only fresh arrivals, drawn in order
            return Requests(self.data.copy())
        return Requests(self.data.take(np.argsort(t, kind="stable"), axis=0))

    @staticmethod
    def concat(parts: list[Requests]) -> Requests:
        parts = [p for p in parts if len(p)]
        if not parts:
            return empty()
        if len(parts) == 1:
            return parts[0]
        return Requests(np.concatenate([p.data for p in parts]))


def empty() -> Requests:
    return Requests(np.empty((0, COLUMNS)))


def fresh(
    t: npt.ArrayLike,
    n_in: npt.ArrayLike,
    n_out: npt.ArrayLike,
    u: npt.ArrayLike,
    overhead: npt.ArrayLike,
    *,
    n_cached: npt.ArrayLike = 0.0,
    session: npt.ArrayLike = -1.0,
    round_: npt.ArrayLike = 0.0,
) -> Requests:
    """New requests first sent at ``t`` (arrays of equal length, or scalars for the keyword fields)."""
    times = np.asarray(t, dtype=np.float64)
    data = np.empty((times.shape[0], COLUMNS))
    data[:, T] = times
    data[:, ORIGIN] = times
    data[:, N_IN] = np.maximum(n_in, 1)
    data[:, N_OUT] = np.maximum(n_out, 1)
    data[:, N_CACHED] = n_cached
    data[:, SESSION] = session
    data[:, ROUND] = round_
    data[:, U] = u
    data[:, OVERHEAD] = overhead
    data[:, RETRIES] = 0.0
    data[:, TTFT_DONE] = 0.0
    data[:, INST] = -1.0
    data[:, ADMITTED] = 0.0
    data[:, FIRST] = np.nan
    data[:, REMAINING] = data[:, N_OUT] - 1.0
    return Requests(data)


class Drawn:
    """New open-loop requests drawn ahead of time, kept as columns sorted by arrival: a time range of them
    becomes request rows only when the fleet takes it. (Building an hour's million rows at once cost more
    in page faults than the rest of the arrivals.)"""

    __slots__ = ("n_cached", "n_in", "n_out", "overhead", "t", "u")

    def __init__(
        self,
        t: FloatArray,
        n_in: npt.ArrayLike,
        n_out: npt.ArrayLike,
        u: npt.ArrayLike,
        overhead: npt.ArrayLike,
        n_cached: npt.ArrayLike,
    ) -> None:
        n = t.shape[0]
        self.t = t
        self.n_in, self.n_out, self.u, self.overhead, self.n_cached = (
            np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)) for x in (n_in, n_out, u, overhead, n_cached)
        )

    def freeze(self) -> None:
        """Read-only from now on (kept for other runs to share)."""
        for column in (self.t, self.n_in, self.n_out, self.u, self.overhead, self.n_cached):
            column.flags.writeable = False

    def between(self, t0: float, t1: float) -> Requests:
        """The requests first sent in [t0, t1), as new rows."""
        return self.rows(self._span(t0, t1))

    def times_between(self, t0: float, t1: float) -> FloatArray:
        """When the requests of [t0, t1) are sent, without building their rows."""
        return self.t[self._span(t0, t1)]

    def _span(self, t0: float, t1: float) -> slice:
        lo, hi = np.searchsorted(self.t, [t0, t1])
        return slice(int(lo), int(hi))

    def rows(self, index: slice = slice(None)) -> Requests:
        return fresh(
            self.t[index], self.n_in[index], self.n_out[index], self.u[index], self.overhead[index],
            n_cached=self.n_cached[index],
        )  # fmt: skip


def draw(
    t: npt.ArrayLike,
    n_in: npt.ArrayLike,
    n_out: npt.ArrayLike,
    rng: np.random.Generator,
    overhead_median: float,
    overhead_sigma: float,
    *,
    n_cached: npt.ArrayLike = 0.0,
) -> Drawn:
    """New open-loop requests sent at ``t`` (sorted); draws their per-request random figures from ``rng``."""
    times = np.asarray(t, dtype=np.float64)
    n = times.shape[0]
    overhead = overhead_median * np.exp(overhead_sigma * rng.standard_normal(n)) if overhead_median > 0 else 0.0
    return Drawn(times, n_in, n_out, rng.random(n), overhead, n_cached)
