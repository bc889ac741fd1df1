"""The daemon's ``POST /v1/webhooks/interruption`` endpoint: verify, parse, record the notice.

Recording is the store's ``mark_notice``; the reconciler drains and replaces the marked instance on its
next tick (level-triggered: a lost webhook only means the provider's own status catches it later).
Rebalance recommendations are acknowledged and logged but not acted on (Karpenter does the same):
they are advisory and often false alarms.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from clocks import Clock
from controller.webhooks.auth import DEFAULT_EVENTBRIDGE_ENV, DEFAULT_SECRET_ENV, WebhookAuth
from controller.webhooks.notice import InterruptionNotice, NoticeSource, WebhookRejected
from controller.webhooks.receive import MAX_BODY_BYTES, receive

log = logging.getLogger(__name__)
Handler = Callable[[Request], Awaitable[Response]]


class NoticeSink(Protocol):
    async def __call__(self, notice: InterruptionNotice, now: float) -> str | None:
        """Record the notice; return the key of the instance it matched, if any."""
        ...


def make_notice_endpoint(auth: WebhookAuth, clock: Clock, sink: NoticeSink, *, wall: Clock | None = None) -> Handler:
    """``wall`` checks signature timestamps (real time, also when the daemon's world runs faster);
    ``clock`` stamps the notice in the daemon's own time."""
    wall_clock = wall or clock

    async def endpoint(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return JSONResponse({"error": f"body over {MAX_BODY_BYTES} bytes"}, status_code=413)
        body = await request.body()
        try:
            notice = receive(request.headers, body, auth, wall_clock.now())
            matched = None if not notice.action.loses_instance else await sink(notice, clock.now())
        except WebhookRejected as exc:
            return JSONResponse({"error": exc.reason}, status_code=exc.status)
        return JSONResponse(
            {
                "accepted": True,
                "action": notice.action.value,
                "instance": matched,
                "acted": matched is not None,
            },
            status_code=202,
        )

    return endpoint


class DaemonSink:
    """Marks the notice in the daemon's store. EventBridge events name no provider account: every
    configured ``type: aws`` account is tried with the instance id."""

    def __init__(self, daemon: Any):
        self.daemon = daemon

    async def __call__(self, notice: InterruptionNotice, now: float) -> str | None:
        controller = getattr(self.daemon, "controller", None)
        if controller is None:
            raise WebhookRejected("the daemon is starting; retry shortly", 503)
        if notice.source is NoticeSource.AWS_EVENTBRIDGE:
            names = [name for name, entry in controller.fleet.providers.items() if entry.type == notice.provider]
        else:
            names = [notice.provider]
        for name in names:
            key: str | None = await asyncio.to_thread(
                controller.store.mark_notice, name, notice.provider_instance_id, notice.key, now
            )
            if key is not None:
                return key
        log.info("interruption notice for %s matched no live instance", notice.provider_instance_id or notice.key)
        return None


def make_handler(daemon: Any) -> Handler:
    """What the daemon mounts. Secrets come from the settings' env var / file names."""
    settings = daemon.settings
    auth = WebhookAuth.from_env(
        secret_env=getattr(settings, "webhook_secret_env", DEFAULT_SECRET_ENV),
        secret_file=getattr(settings, "webhook_secret_file", None),
        eventbridge_env=getattr(settings, "eventbridge_token_env", DEFAULT_EVENTBRIDGE_ENV),
        eventbridge_file=getattr(settings, "eventbridge_token_file", None),
    )
    if not auth.enabled:
        log.warning(
            "interruption webhooks are off: set %s (agents) and/or %s (EventBridge)",
            DEFAULT_SECRET_ENV,
            DEFAULT_EVENTBRIDGE_ENV,
        )
    return make_notice_endpoint(auth, daemon.clock, DaemonSink(daemon), wall=getattr(daemon, "real_clock", None))
