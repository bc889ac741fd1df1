"""An HTTP/1.1 fault proxy on 127.0.0.1, between an adapter and a local provider API (a fake server).

The faults a fake cannot serve itself, because they happen between the cloud and us: the provider acts
on a request and the answer is lost (the connection resets), or it answers success with a body nobody can
read. Each request is forwarded on its own upstream connection and the client connection is closed after
every answer (``Connection: close``), so one request is one connection and a fault hits only its own.

    proxy = FaultProxy(upstream_url).start()
    proxy.add(ProxyFault.RESET_AFTER_ACTING, method="POST", path="/api/deployments", times=None)  # every create
    ... adapter with base_url=proxy.url ...
    proxy.stop()

Faults: ``RESET_AFTER_ACTING`` (forward, then reset the client connection without answering),
``UNREADABLE_2XX`` (forward; a 2xx answer reaches the client with a body that is not JSON),
``HANG`` (forward, then hold the answer ``hang_seconds`` of real time: past the client's timeout),
``RATE_LIMITED`` (429 with ``Retry-After``, not forwarded), ``SERVER_ERROR`` (500, not forwarded),
``NOT_FOUND`` (404, not forwarded: a get-by-id that lags behind a create, as a listing does;
``proxy.add(ProxyFault.NOT_FOUND, method="GET", path="/api/deployments/", times=3)``).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from dataclasses import dataclass, field
from enum import Enum
from urllib.parse import urlsplit

START_TIMEOUT = 10.0
MAX_HEAD = 64 * 1024


class ProxyFault(Enum):
    RESET_AFTER_ACTING = "reset-after-acting"
    UNREADABLE_2XX = "unreadable-2xx"
    HANG = "hang"
    RATE_LIMITED = "rate-limited"
    SERVER_ERROR = "server-error"
    NOT_FOUND = "not-found"


@dataclass
class _Rule:
    fault: ProxyFault
    method: str | None
    path: str | None
    times: int | None  # None: every matching request


@dataclass
class FaultProxy:
    """A loopback proxy to ``upstream`` (``http://127.0.0.1:port``) that injects the faults it is given."""

    upstream: str
    hang_seconds: float = 1.0
    retry_after: int = 2
    rules: list[_Rule] = field(default_factory=list)
    forwarded: list[tuple[str, str]] = field(default_factory=list)  # (method, path) the upstream received
    injected: list[tuple[ProxyFault, str, str]] = field(default_factory=list)  # (fault, method, path)

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"FaultProxy: upstream must be http://host:port, not {self.upstream!r}")
        self._host, self._port = parts.hostname, parts.port
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- controls --------------------------------------------------------------------------------
    def add(
        self, fault: ProxyFault, *, method: str | None = None, path: str | None = None, times: int | None = 1
    ) -> None:
        """The next ``times`` requests matching ``method`` and ``path`` (a prefix) get ``fault``; None: all."""
        with self._lock:
            self.rules.append(_Rule(fault, method, path, times))

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def count(self, method: str, path: str) -> int:
        """Requests the upstream received for ``method`` and exactly ``path`` (query string excluded)."""
        with self._lock:
            return sum(1 for m, p in self.forwarded if m == method and p == path)

    def _fault_for(self, method: str, path: str) -> ProxyFault | None:
        with self._lock:
            for rule in self.rules:
                if rule.method not in (None, method) or (rule.path is not None and not path.startswith(rule.path)):
                    continue
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        self.rules.remove(rule)
                self.injected.append((rule.fault, method, path))
                return rule.fault
        return None

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT) or self._server is None:
            raise RuntimeError("fault proxy did not start")
        return self

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is not None and server is not None:
            loop.call_soon_threadsafe(server.close)
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:  # answers still held (a HANG past the client's deadline) end with the proxy, not after it
            held = asyncio.all_tasks(loop)
            for task in held:
                task.cancel()
            if held:
                loop.run_until_complete(asyncio.gather(*held, return_exceptions=True))
            loop.close()

    # ---- one connection, one request -------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader)
            if request is None:
                return
            method, path, raw = request
            fault = self._fault_for(method, path)
            if fault is ProxyFault.SERVER_ERROR:
                writer.write(_response(500, b'{"error": "Internal Server Error"}', b"application/json"))
            elif fault is ProxyFault.NOT_FOUND:
                writer.write(_response(404, b'{"error": "Not Found", "message": "not found"}', b"application/json"))
            elif fault is ProxyFault.RATE_LIMITED:
                extra = f"Retry-After: {self.retry_after}\r\n".encode()
                writer.write(_response(429, b'{"error": "Too Many Requests"}', b"application/json", extra))
            else:
                answer = await self._forward(method, path, raw)
                if fault is ProxyFault.RESET_AFTER_ACTING:
                    _reset(writer)  # the upstream acted; the client never hears of it
                    return
                if fault is ProxyFault.HANG:
                    await asyncio.sleep(self.hang_seconds)
                if fault is ProxyFault.UNREADABLE_2XX and 200 <= _status(answer) < 300:
                    answer = _response(_status(answer), b"<html><body>502 Bad Gatew", b"text/html")
                writer.write(answer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (its timeout): nothing left to answer
        except asyncio.CancelledError:
            pass  # the proxy stops while it still holds this answer (``_run``): ends quietly, as the client did
        finally:
            if not writer.is_closing():
                writer.close()

    async def _forward(self, method: str, path: str, raw: bytes) -> bytes:
        up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        try:
            up_writer.write(raw)
            await up_writer.drain()
            answer = await up_reader.read()  # to EOF: the request asked the upstream to close
        finally:
            up_writer.close()
        with self._lock:
            self.forwarded.append((method, path))
        return answer


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    """(method, path without query, the request rewritten with ``Connection: close``), or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    if len(head) > MAX_HEAD:
        raise ConnectionError("request head too large")
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = [line for line in lines[1:] if line]
    length = 0
    kept = []
    for line in headers:
        name, _, value = line.partition(":")
        lowered = name.strip().lower()
        if lowered == "transfer-encoding":
            raise ConnectionError("chunked requests are not supported by the fault proxy")
        if lowered == "content-length":
            length = int(value.strip())
        if lowered not in ("connection", "keep-alive"):
            kept.append(line)
    body = await reader.readexactly(length) if length else b""
    raw = "\r\n".join([f"{method} {target} {version}", *kept, "Connection: close", "", ""]).encode("latin-1")
    return method, target.split("?", 1)[0], raw + body


def _status(answer: bytes) -> int:
    try:
        return int(answer.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def _response(status: int, body: bytes, content_type: bytes, extra: bytes = b"") -> bytes:
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n".encode()
        + b"Content-Type: "
        + content_type
        + b"\r\n"
        + extra
        + b"\r\n"
    )
    return head + body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a load balancer dropping the connection does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
