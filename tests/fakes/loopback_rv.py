"""Local stand-ins for cloud APIs, served over real HTTP on 127.0.0.1 so adapters run their real network path.

``LoopbackServer`` runs a Starlette app with uvicorn in a thread on a free port; ``FaultQueue`` holds the
faults a test asks for (the next N requests fail in a given way) and an optional seeded chaos rate.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request

START_TIMEOUT = 10.0


class LoopbackServer:
    """``with LoopbackServer(app) as url: ...`` serves ``app`` on 127.0.0.1 until the block ends."""

    def __init__(self, app: Starlette) -> None:
        self._app = app
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:  # bounded: START_TIMEOUT
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("loopback server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            if self._thread.is_alive():
                raise RuntimeError("loopback server did not stop")
        self._server = self._thread = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class FaultQueue:
    """Faults for the next requests, in order; each entry names the requests it applies to."""

    pending: list[tuple[str, Callable[[Request], bool]]] = field(default_factory=list)
    chaos_rate: float = 0.0
    chaos_kinds: tuple[str, ...] = ("5xx", "timeout")
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def add(self, kind: str, times: int = 1, when: Callable[[Request], bool] | None = None) -> None:
        self.pending.extend([(kind, when or (lambda _r: True))] * times)

    def chaos(self, rate: float, *, seed: int = 0, kinds: tuple[str, ...] = ("5xx", "timeout")) -> None:
        """Make a share ``rate`` of all later requests fail with one of ``kinds`` (seeded, reproducible)."""
        self.chaos_rate, self.chaos_kinds, self.rng = rate, kinds, random.Random(seed)

    def take(self, request: Request) -> str | None:
        for i, (kind, when) in enumerate(self.pending):
            if when(request):
                del self.pending[i]
                return kind
        if self.chaos_rate and self.rng.random() < self.chaos_rate:
            return self.rng.choice(self.chaos_kinds)
        return None

    def clear(self) -> None:
        self.pending.clear()
        self.chaos_rate = 0.0
