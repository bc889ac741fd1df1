"""The daemon's ``POST /v1/webhooks/interruption`` endpoint: verify, parse, refuse replays, record.

The body is read chunk by chunk up to ``MAX_BODY_BYTES`` (413 past it, before anything is parsed).
A request already accepted once (same signature, or same EventBridge event id) is refused with 409:
the digests live in the store (``webhook_seen``), so every daemon sharing it sees them. A notice
naming an instance of another provider account is refused with 422 and changes nothing.

Recording is the store's ``failures.mark_notice``; the reconciler drains and replaces the marked instance on its
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

from scalectl.clocks import Clock
from scalectl.controller.store.repository import NoticeMismatch
from scalectl.controller.store.seen_requests import SeenRequests
from scalectl.controller.webhooks.auth import DEFAULT_EVENTBRIDGE_ENV, DEFAULT_SECRET_ENV, WebhookAuth
from scalectl.controller.webhooks.notice import InterruptionNotice, NoticeSource, WebhookRejected
from scalectl.controller.webhooks.receive import read_limited, receive, replay_digest

log = logging.getLogger(__name__)
Handler = Callable[[Request], Awaitable[Response]]


class ReplayGuard(Protocol):
    async def claim(self, digest: str, now: float) -> bool:
        """True the first time ``digest`` is seen; False for a replay. May raise WebhookRejected (503)."""
        ...

    async def release(self, digest: str) -> None: ...


class NoticeSink(Protocol):
    async def __call__(self, notice: InterruptionNotice, now: float) -> str | None:
        """Record the notice; return the key of the instance it matched, if any."""
        ...


def make_notice_endpoint(
    auth: WebhookAuth, clock: Clock, sink: NoticeSink, *, replays: ReplayGuard, wall: Clock | None = None
) -> Handler:
    """``wall`` checks signature timestamps (real time, also when the daemon's world runs faster);
    ``clock`` stamps the notice in the daemon's own time."""
    wall_clock = wall or clock

    async def endpoint(request: Request) -> Response:
        try:
            body = await read_limited(request.headers.get("content-length"), request.stream())
            notice = receive(request.headers, body, auth, wall_clock.now())
            digest = replay_digest(request.headers, body, notice)
            if not await replays.claim(digest, wall_clock.now()):
                raise WebhookRejected("this request was accepted before: replays are refused", 409)
            try:
                matched = None if not notice.action.loses_instance else await sink(notice, clock.now())
            except WebhookRejected:
                await replays.release(digest)  # not acted on: the sender may try again
                raise
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


def _store(daemon: Any) -> Any:
    controller = getattr(daemon, "controller", None)
    if controller is None:
        raise WebhookRejected("the daemon is starting; retry shortly", 503)
    return controller.store


class DaemonReplayGuard:
    """Accepted-request digests in the daemon's store, kept twice the freshness window (older
    signatures fail their timestamp check before they get here)."""

    def __init__(self, daemon: Any, keep_for: float):
        self.daemon = daemon
        self.keep_for = keep_for

    def _seen(self) -> SeenRequests:
        return SeenRequests(_store(self.daemon).sessions, self.keep_for)

    async def claim(self, digest: str, now: float) -> bool:
        return await asyncio.to_thread(self._seen().claim, digest, now)

    async def release(self, digest: str) -> None:
        if getattr(self.daemon, "controller", None) is not None:
            await asyncio.to_thread(self._seen().release, digest)


class DaemonSink:
    """Marks the notice in the daemon's store. EventBridge events name no provider account: every
    configured ``type: aws`` account is tried with the instance id."""

    def __init__(self, daemon: Any):
        self.daemon = daemon

    async def __call__(self, notice: InterruptionNotice, now: float) -> str | None:
        controller = getattr(self.daemon, "controller", None)
        if controller is None:
            raise WebhookRejected("the daemon is starting; retry shortly", 503)
        mark = controller.store.failures.mark_notice
        if notice.source is NoticeSource.AWS_EVENTBRIDGE:
            names = [name for name, entry in controller.fleet.providers.items() if entry.type == notice.provider]
        else:
            names = [notice.provider]
        for name in names:
            try:
                key: str | None = await asyncio.to_thread(mark, name, notice.provider_instance_id, notice.key, now)
            except NoticeMismatch as exc:
                raise WebhookRejected(f"notice refused: {exc}", 422) from None
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
    return make_notice_endpoint(
        auth,
        daemon.clock,
        DaemonSink(daemon),
        replays=DaemonReplayGuard(daemon, keep_for=2 * auth.window),
        wall=getattr(daemon, "real_clock", None),
    )
