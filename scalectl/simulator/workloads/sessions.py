"""Closed-loop sessions: each user sends the next request a think time after the previous answer arrives."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scalectl.simulator.requests import ROUND, SESSION, FloatArray, IntArray, Requests, fresh
from scalectl.simulator.workloads.tokens import TokenDist


class ClosedLoopSessions:
    """Up to ``max_sessions`` users; ``active(t)`` says how many are active (a shape may move it over the day).

    Per tick, each round's figures (think time, token counts, client overhead) are drawn once for every
    session, so re-simulating the tick (the fleet iterates a tick until the rounds agree) gives the same draws.
    """

    def __init__(
        self,
        max_sessions: int,
        active: Callable[[float], int],
        think_min_s: float,
        think_max_s: float,
        n_in: TokenDist,
        n_out: TokenDist,
        rng: np.random.Generator,
        overhead_median_s: float,
        overhead_sigma: float,
        cached_share: float = 0.0,
    ) -> None:
        self.closed_loop = True
        self.max_sessions = max_sessions
        self._active = active
        self._think = (think_min_s, think_max_s)
        self._n_in, self._n_out = n_in, n_out
        self._rng = rng
        self._overhead = (overhead_median_s, overhead_sigma)
        self._cached_share = cached_share
        self._next = np.full(max_sessions, np.inf)
        self._in_flight = np.zeros(max_sessions, dtype=np.bool_)
        # think, n_in, n_out, u, overhead as (round, session) arrays; row 0 is this tick's round 0
        self._stack: tuple[np.ndarray, ...] = tuple(np.empty((0, max_sessions)) for _ in range(5))
        self._max_round = -1
        self._block_rows = max(16, 4096 // max(max_sessions, 1))
        self._n_active = 0

    def _columns_upto(self, j: int) -> None:
        """Make rounds up to ``j`` of this tick available: think time before each and the request it sends.

        Rows are drawn in large blocks and handed out tick by tick (a tick's round ``j`` is row base + j), so
        drawing costs little per tick and re-simulating a tick reads the same rows.
        """
        self._max_round = max(self._max_round, j)
        if j < self._stack[0].shape[0]:
            return
        n, k = self.max_sessions, max(j + 1 - self._stack[0].shape[0], self._block_rows)
        rng = self._rng
        think = rng.uniform(self._think[0], self._think[1], (k, n))
        n_in = self._n_in.sample(rng, k * n).reshape(k, n)
        n_out = self._n_out.sample(rng, k * n).reshape(k, n)
        median, sigma = self._overhead
        overhead = median * np.exp(sigma * rng.standard_normal((k, n))) if median > 0 else np.zeros((k, n))
        block = (think, n_in.astype(np.float64), n_out.astype(np.float64), rng.random((k, n)), overhead)
        self._stack = tuple(np.concatenate(p) for p in zip(self._stack, block, strict=True))

    def _requests(self, session: IntArray, round_: IntArray, t: FloatArray) -> Requests:
        _, n_in, n_out, u, overhead = self._stack
        n_in_sel = n_in[round_, session]
        return fresh(
            t,
            n_in_sel,
            n_out[round_, session],
            u[round_, session],
            overhead[round_, session],
            n_cached=np.floor(n_in_sel * self._cached_share),
            session=session,
            round_=round_,
        )

    def begin_tick(self, t0: float, t1: float) -> Requests:
        self._stack = tuple(rows[self._max_round + 1 :] for rows in self._stack)  # last tick's rows are spent
        self._max_round = -1
        self._columns_upto(0)
        n_active = max(0, min(self.max_sessions, int(self._active(t0))))
        self._n_active = n_active
        ids = np.arange(self.max_sessions)
        joining = (ids < n_active) & ~self._in_flight & np.isinf(self._next)
        self._next[joining] = t0 + self._stack[0][0][joining]
        self._next[(ids >= n_active) & ~self._in_flight] = np.inf  # leave after their last answer
        due = np.flatnonzero(self._next < t1)
        due = due[np.argsort(self._next[due], kind="stable")]
        return self._requests(due, np.zeros(due.shape[0], dtype=np.int64), self._next[due])

    def next_sends(
        self, session: IntArray, round_: IntArray, end: FloatArray, t1: float
    ) -> tuple[IntArray, IntArray, FloatArray]:
        """(session, round, time) of the requests sent before ``t1`` after answers to ``round_`` at ``end``."""
        mine = (session >= 0) & (session < self._n_active)
        sessions, rounds = session[mine], round_[mine] + 1
        if not sessions.shape[0]:
            return sessions, rounds, end[mine]
        self._columns_upto(int(rounds.max()))
        t = end[mine] + self._stack[0][rounds, sessions]
        keep = t < t1
        return sessions[keep], rounds[keep], t[keep]

    def figures(self, session: IntArray, round_: IntArray) -> tuple[FloatArray, ...]:
        """Prompt tokens to compute, output tokens, step phase and client overhead of those requests."""
        _, n_in, n_out, u, overhead = self._stack
        n_in_sel = n_in[round_, session]
        prompt = np.maximum(n_in_sel - np.floor(n_in_sel * self._cached_share), 1.0)
        return prompt, n_out[round_, session], u[round_, session], overhead[round_, session]

    def make(self, session: IntArray, round_: IntArray, t: FloatArray) -> Requests:
        return self._requests(session, round_, t)

    def commit(self, sent: Requests, done: Requests, done_end: FloatArray, t1: float) -> None:
        n = self.max_sessions
        last_sent = np.full(n, -2)
        sent_s = sent.icol(SESSION)
        np.maximum.at(last_sent, sent_s, sent.icol(ROUND))
        self._in_flight[sent_s] = True
        self._next[sent_s] = np.inf
        session = done.icol(SESSION)
        mine = session >= 0
        s, r, end = session[mine], done.icol(ROUND)[mine], done_end[mine]
        if not s.shape[0]:
            return
        order = np.lexsort((r, s))  # the last completion of each session wins
        s, r, end = s[order], r[order], end[order]
        last = np.append(s[1:] != s[:-1], True)
        s, r, end = s[last], r[last], end[last]
        answered = r >= last_sent[s]
        s, r, end = s[answered], r[answered] + 1, end[answered]
        self._in_flight[s] = False
        self._columns_upto(int(r.max()) if r.shape[0] else 0)
        self._next[s] = np.maximum(end + self._stack[0][r, s], t1)
        self._next[s[s >= self._n_active]] = np.inf
