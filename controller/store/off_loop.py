"""Database work off the event loop. SQLAlchemy runs synchronously: a statement that waits on a slow or
partitioned database would otherwise stop everything else the daemon's loop does (health, metrics,
webhooks, the activator, systemd's watchdog). ``StoreCalls`` runs each piece of store work in a worker
thread and remembers how long the oldest one has waited, so readiness can say the store stopped answering.

In-memory SQLite (tests, the simulator) has one connection per thread, so there it runs inline."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from scalectl.clocks import Clock, SystemClock

P = ParamSpec("P")
T = TypeVar("T")


class StoreCalls:
    def __init__(self, clock: Clock, *, threaded: bool = True) -> None:
        """``clock``: the real one (how long a statement has waited is about this process)."""
        self._clock = clock
        self.threaded = threaded
        self._ids = itertools.count()
        self._started: dict[int, float] = {}  # call -> when it started (monotonic)

    @classmethod
    def inline(cls) -> StoreCalls:
        return cls(SystemClock(), threaded=False)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if not self.threaded:
            return fn(*args, **kwargs)
        call = next(self._ids)
        self._started[call] = self._clock.monotonic()
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        finally:
            del self._started[call]

    def waiting(self) -> float:
        """Seconds the oldest store call in flight has waited (0: none in flight)."""
        if not self._started:
            return 0.0
        return max(0.0, self._clock.monotonic() - min(self._started.values()))


def in_memory_sqlite(url: str) -> bool:
    return url.startswith("sqlite") and (":memory:" in url or url.rstrip("/") in ("sqlite:", "sqlite+pysqlite:"))
