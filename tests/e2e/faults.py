"""Faults for the daemon as a process, on loopback: a provider API that hangs, systemd's notify socket
played by the test, and a TCP proxy that holds every byte (a network partition in front of PostgreSQL).
Shared by tests/e2e/test_fault_health.py and bench/bench_faults_health.py."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import select
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send


class HangingFront:
    """An ASGI app in front of a fake provider API: while ``hang`` is set, every request waits that many
    seconds before it is passed on (what a provider whose API stopped answering looks like)."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner
        self.hang = 0.0
        self.hung = 0  # requests that were held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.hang > 0:
            self.hung += 1
            await asyncio.sleep(self.hang)
        await self.inner(scope, receive, send)


class NotifySocket:
    """systemd's side of sd_notify: a Unix datagram socket; a thread records (monotonic time, message)."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))  # AF_UNIX paths must stay short
        self.path = self._dir / "notify"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(self.path))
        self._sock.settimeout(0.2)
        self.messages: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                data = self._sock.recv(4096)
                self.messages.append((time.monotonic(), data.decode()))

    def watchdogs(self) -> list[float]:
        return [t for t, m in list(self.messages) if "WATCHDOG=1" in m]

    def longest_gap(self, start: float, end: float) -> float:
        """The longest time without WATCHDOG=1 between ``start`` and ``end`` (monotonic)."""
        times = [start, *(t for t in self.watchdogs() if start < t < end), end]
        return max(b - a for a, b in itertools.pairwise(times))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()
        self.path.unlink(missing_ok=True)
        self._dir.rmdir()


class HoldingProxy:
    """A loopback TCP proxy. While ``hold`` is set it forwards nothing in either direction and keeps every
    connection open (new ones are accepted and held too): a partition that neither answers nor resets."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.hold = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            thread = threading.Thread(target=self._pipe, args=(client,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pipe(self, client: socket.socket) -> None:
        self._sockets.append(client)
        while self.hold.is_set() and not self._stop.is_set():  # a connection made during the partition waits
            time.sleep(0.05)
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        self._sockets.append(server)
        pairs = {client: server, server: client}
        try:
            while not self._stop.is_set():
                if self.hold.is_set():
                    time.sleep(0.05)  # bytes stay in the kernel's buffers, undelivered
                    continue
                ready, _, _ = select.select(list(pairs), [], [], 0.1)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    pairs[sock].sendall(data)
        except OSError:
            return
        finally:
            client.close()
            server.close()

    def close(self) -> None:
        self._stop.set()
        self.hold.clear()
        self._accept.join(timeout=5)
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._listener.close()


def get_json(url: str, timeout: float) -> tuple[int, Any, float]:
    """(status, body, seconds) of a GET; status 0 when it did not answer within ``timeout``."""
    import httpx

    started = time.monotonic()
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError:
        return 0, None, time.monotonic() - started
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return response.status_code, body, time.monotonic() - started
