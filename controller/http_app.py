"""The daemon's local HTTP surface: /healthz, /readyz, /metrics, /v1/status, interruption webhooks, and the
activator (/activate/<tier>/…) where an empty tier's requests wait for its first instance."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import Clock
from scalectl.controller.metrics import DaemonMetrics
from scalectl.serving.activator import Activator


class Health:
    """Liveness and readiness as the tick loop reports them. ``clock`` is the real one (never the
    accelerated demo clock): health is about this process."""

    def __init__(self, tick_interval_real: float, clock: Clock):
        self.tick_interval_real = tick_interval_real
        self.clock = clock
        self.last_ok: float | None = None
        self.last_error: str | None = None
        self.stopping = False

    def tick_ok(self) -> None:
        self.last_ok = self.clock.monotonic()
        self.last_error = None

    def tick_failed(self, error: str) -> None:
        self.last_error = error

    def ready(self) -> tuple[bool, str]:
        if self.stopping:
            return False, "stopping"
        if self.last_ok is None:
            return False, "no reconcile tick has completed yet"
        age = self.clock.monotonic() - self.last_ok
        if age > max(3 * self.tick_interval_real, 30.0):
            return False, f"last good tick {age:.0f}s ago" + (f" ({self.last_error})" if self.last_error else "")
        return True, "ok"


WebhookHandler = Callable[[Request], Awaitable[Response]]


def build_http_app(
    health: Health,
    metrics: DaemonMetrics,
    status: Callable[[], dict[str, Any]],
    webhook: WebhookHandler | None = None,
    activator: Activator | None = None,
) -> Starlette:
    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        ok, why = health.ready()
        return JSONResponse({"status": "ok" if ok else "unavailable", "reason": why}, status_code=200 if ok else 503)

    async def metrics_endpoint(_: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def status_endpoint(_: Request) -> Response:
        return JSONResponse(status())

    routes = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_endpoint),
        Route("/v1/status", status_endpoint),
    ]
    if webhook is not None:
        routes.append(Route("/v1/webhooks/interruption", webhook, methods=["POST"]))
    if activator is not None:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
        routes.append(Route("/activate/{tier}/{path:path}", activator.handle, methods=methods))
    return Starlette(routes=routes)


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: the daemon owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def http_server(app: Any, host: str, port: int) -> uvicorn.Server:
    """The daemon's HTTP server (no access log; the daemon handles signals)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off", access_log=False)
    return _QuietServer(config)
