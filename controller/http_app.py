"""The daemon's local HTTP surface: /healthz, /readyz, /metrics, /v1/status, interruption webhooks, and the
activator (/activate/<tier>/…) where an empty tier's requests wait for its first instance."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.exc import DBAPIError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import Clock
from scalectl.controller.metrics import DaemonMetrics
from scalectl.controller.store.errors import one_line
from scalectl.serving.activator import Activator


class Health:
    """Liveness and readiness as the tick loop and the store report them. ``clock`` is the real one (never
    the accelerated demo clock): health is about this process.

    Not ready: before the first good tick; when the store failed (a tick or the replica's heartbeat could
    not reach it) until it answers again; when a store call has waited longer than two ticks (a partition:
    the statement neither answers nor fails); when no tick has succeeded for three ticks (at least 30 s)."""

    def __init__(self, tick_interval_real: float, clock: Clock, store_waiting: Callable[[], float] | None = None):
        self.tick_interval_real = tick_interval_real
        self.clock = clock
        self.store_waiting = store_waiting or (lambda: 0.0)
        self.last_ok: float | None = None
        self.last_error: str | None = None
        self.store_error: str | None = None
        self.stopping = False

    def tick_ok(self) -> None:
        self.last_ok = self.clock.monotonic()
        self.last_error = self.store_error = None

    def tick_failed(self, error: str) -> None:
        self.last_error = error

    def store_failed(self, error: str) -> None:
        self.store_error = error

    def store_answered(self) -> None:
        self.store_error = None

    def ready(self) -> tuple[bool, str]:
        if self.stopping:
            return False, "stopping"
        if self.store_error is not None:
            return False, f"store unreachable: {self.store_error}"
        waited = self.store_waiting()
        if waited > max(2 * self.tick_interval_real, 2.0):
            return False, f"store not answering: a statement has waited {waited:.0f}s"
        if self.last_ok is None:
            return False, "no reconcile tick has completed yet"
        age = self.clock.monotonic() - self.last_ok
        if age > max(3 * self.tick_interval_real, 30.0):
            return False, f"last good tick {age:.0f}s ago" + (f" ({self.last_error})" if self.last_error else "")
        return True, "ok"


class StatusUnavailable(Exception):
    """/v1/status cannot be built now (the store is unreachable or slow); the message is one line."""


WebhookHandler = Callable[[Request], Awaitable[Response]]


def build_http_app(
    health: Health,
    metrics: DaemonMetrics,
    status: Callable[[], dict[str, Any] | Awaitable[dict[str, Any]]],
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
        try:
            document = status()
            if inspect.isawaitable(document):
                document = await document
        except StatusUnavailable as exc:  # one line for the operator; the log has the rest when it matters
            return JSONResponse({"error": str(exc)}, status_code=503)
        except DBAPIError as exc:
            return JSONResponse({"error": f"store unreachable: {one_line(exc)}"}, status_code=503)
        return JSONResponse(document)

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
