"""Local stand-ins for cloud APIs: real HTTP servers on 127.0.0.1, so adapters run their real httpx path.

``LoopbackServer`` runs a Starlette app under uvicorn in a thread on a free port. ``FaultPlan`` is
the shared fault injection: queued one-shot faults (optionally for one method/path) and a seeded
random fault rate ("chaos"). Each fake decides what a fault looks like in its provider's own format.
"""

from __future__ import annotations

import random
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

import uvicorn
from starlette.types import ASGIApp

START_TIMEOUT = 10.0


class Fault(Enum):
    SERVER_ERROR = "server-error"  # a 5xx in the provider's error format
    TIMEOUT = "timeout"  # the response comes too late (after the client's timeout)
    RATE_LIMITED = "rate-limited"  # 429 with the provider's headers/body
    AUTH = "auth"  # 401 as if the key were wrong
    NO_CAPACITY = "no-capacity"  # only on create/launch requests
    GARBAGE = "garbage"  # a 5xx that is not the provider's format (a proxy's HTML page)


@dataclass
class _Queued:
    fault: Fault
    method: str | None
    path: str | None


@dataclass
class FaultPlan:
    """Which requests fail. Queued faults go first (in order); then the random rate applies."""

    random_rate: float = 0.0
    random_kinds: tuple[Fault, ...] = (Fault.SERVER_ERROR, Fault.TIMEOUT)
    seed: int = 1234
    queued: list[_Queued] = field(default_factory=list)
    injected: list[Fault] = field(default_factory=list)  # every fault actually served

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def add(self, fault: Fault, times: int = 1, *, method: str | None = None, path: str | None = None) -> None:
        """The next ``times`` matching requests fail with ``fault`` (``path`` matches as a prefix)."""
        self.queued.extend(_Queued(fault, method, path) for _ in range(times))

    def chaos(
        self, rate: float, *, seed: int = 0, kinds: tuple[Fault, ...] = (Fault.SERVER_ERROR, Fault.TIMEOUT)
    ) -> None:
        """Make a share ``rate`` of all later requests fail with one of ``kinds`` (seeded, reproducible)."""
        self.random_rate, self.random_kinds, self.seed = rate, kinds, seed
        self._rng = random.Random(seed)

    def clear(self) -> None:
        self.queued.clear()
        self.injected.clear()
        self.random_rate = 0.0

    def next_fault(self, method: str, path: str, *, is_create: bool = False) -> Fault | None:
        for i, q in enumerate(self.queued):
            if q.method not in (None, method) or (q.path is not None and not path.startswith(q.path)):
                continue
            if q.fault is Fault.NO_CAPACITY and not is_create:
                continue
            del self.queued[i]
            self.injected.append(q.fault)
            return q.fault
        if self.random_rate > 0 and self._rng.random() < self.random_rate:
            fault = self._rng.choice(self.random_kinds)
            self.injected.append(fault)
            return fault
        return None


class WindowLimit:
    """A provider's documented request limit: at most ``limit`` requests in any ``window`` seconds,
    on the fake's injected clock. ``take()`` counts a request, or returns the seconds until one is
    allowed (what the fake puts in its 429's Retry-After)."""

    def __init__(self, clock: object, limit: int, window: float):
        self._clock = clock
        self.limit = limit
        self.window = window
        self._sent: deque[float] = deque()
        self.refused = 0

    def take(self) -> float | None:
        now = float(self._clock.monotonic())  # type: ignore[attr-defined]
        while self._sent and self._sent[0] <= now - self.window:
            self._sent.popleft()
        if len(self._sent) >= self.limit:
            self.refused += 1
            return max(0.0, self._sent[0] + self.window - now)
        self._sent.append(now)
        return None

    def remaining(self) -> int:
        return max(0, self.limit - len(self._sent))


class LoopbackServer:
    """Serve ``app`` on 127.0.0.1 at a free port from a background thread.

    ``LoopbackServer(app).start()`` returns the running server (``.url``, ``.stop()``); as a context
    manager it stops when the block ends.
    """

    def __init__(self, app: ASGIApp):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this: without it Nagle + delayed ACK add ~40 ms per response.
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = START_TIMEOUT) -> LoopbackServer:
        self._thread.start()
        waiter = threading.Event()
        for _ in range(int(timeout / 0.01)):  # bounded wait for uvicorn to accept connections
            if self._server.started:
                return self
            if not self._thread.is_alive():
                break
            waiter.wait(0.01)
        self.stop()
        raise RuntimeError("loopback server did not start")

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._sock.close()
        if self._thread.is_alive():
            raise RuntimeError("loopback server did not stop")

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
