"""Running stand-ins: in-process for tests (a uvicorn server in a thread, port 0 → URL), many endpoints
behind one process (one uvicorn server, one socket per endpoint, each its own engine), or as the CLI process."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from scalectl.vllm_standin.app import Standin, StandinConfig


def _listen(host: str, port: int) -> socket.socket:
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto says TCP, and
    # without it a response written as headers + body stalls 40 ms on delayed ACKs.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class PortDispatcher:
    """One ASGI app for many stand-ins: routes by the local port the connection came in on."""

    def __init__(self, by_port: dict[int, Standin]):
        self.by_port = by_port

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    for s in self.by_port.values():
                        s.engine.start()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    for s in self.by_port.values():
                        await s.engine.stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        port = scope["server"][1]
        await self.by_port[port].app(scope, receive, send)


def build_server(app: Any, *, shutdown_timeout: float = 30.0, log_level: str = "warning") -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=max(1, round(shutdown_timeout)),
        access_log=False,
        backlog=2048,
    )
    return uvicorn.Server(config)


@dataclass
class RunningStandins:
    """Handle on stand-ins served from a background thread. ``stop()`` (or the context manager) ends them."""

    urls: list[str]
    standins: list[Standin]
    _server: uvicorn.Server
    _thread: threading.Thread
    _sockets: list[socket.socket] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def standin(self) -> Standin:
        return self.standins[0]

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        for s in self._sockets:
            s.close()

    def __enter__(self) -> RunningStandins:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_in_thread(
    configs: StandinConfig | Sequence[StandinConfig] | None = None,
    *,
    host: str = "127.0.0.1",
    shutdown_timeout: float = 5.0,
    start_timeout: float = 10.0,
) -> RunningStandins:
    """Serve one stand-in per config on fresh loopback ports; returns once they answer."""
    if configs is None:
        configs = [StandinConfig()]
    elif isinstance(configs, StandinConfig):
        configs = [configs]
    sockets = [_listen(host, 0) for _ in configs]
    standins = [Standin(c) for c in configs]
    by_port = {s.getsockname()[1]: st for s, st in zip(sockets, standins, strict=True)}
    app: Any = standins[0].app if len(standins) == 1 else PortDispatcher(by_port)
    server = build_server(app, shutdown_timeout=shutdown_timeout)

    def serve() -> None:
        asyncio.run(server.serve(sockets=sockets))

    thread = threading.Thread(target=serve, name="vllm-standin", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the vLLM stand-in did not start")
        time.sleep(0.01)
    urls = [f"http://{host}:{s.getsockname()[1]}" for s in sockets]
    return RunningStandins(urls, standins, server, thread, sockets)


def serve_forever(config: StandinConfig, host: str, port: int, shutdown_timeout: float) -> int:
    """The CLI process: serve until SIGTERM/SIGINT, let in-flight requests finish (bounded), exit 0."""
    standin = Standin(config)
    server = build_server(standin.app, shutdown_timeout=shutdown_timeout, log_level="info")
    sock = _listen(host, port)
    # uvicorn re-raises the signal it shut down on once it is done, with the handlers that were there
    # before; quiet ones make that re-raise a no-op, so a drained shutdown exits 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
    return 0
