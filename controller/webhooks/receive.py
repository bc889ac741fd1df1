"""One webhook request in, one verified InterruptionNotice out (or a WebhookRejected). No I/O."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Mapping

from scalectl.controller.webhooks.auth import SIGNATURE_HEADER, AuthMethod, WebhookAuth, authenticate, check_fresh
from scalectl.controller.webhooks.notice import InterruptionNotice, NoticeSource, WebhookRejected, parse_notice

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 64 * 1024  # EventBridge events are at most 256 KB, but ours are a few hundred bytes


async def read_limited(declared_length: str | None, chunks: AsyncIterator[bytes], limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, read chunk by chunk and refused (413) as soon as it passes ``limit``: a body
    declared or streamed (chunked) beyond the limit is never held in memory, only its first bytes."""
    if declared_length is not None and declared_length.strip().isdigit() and int(declared_length) > limit:
        raise WebhookRejected(f"body over {limit} bytes", 413)
    body = bytearray()
    async for chunk in chunks:
        if len(body) + len(chunk) > limit:
            raise WebhookRejected(f"body over {limit} bytes", 413)
        body.extend(chunk)
    return bytes(body)


def replay_digest(headers: Mapping[str, str], body: bytes, notice: InterruptionNotice) -> str:
    """What a replay of this (authenticated) request repeats: its signature, or the EventBridge event id
    (the token is static, so the event is the request's identity). Hex SHA-256, fixed length."""
    h = {k.lower(): v for k, v in headers.items()}
    if SIGNATURE_HEADER in h:
        what = "sig:" + h[SIGNATURE_HEADER].strip().lower()
    elif notice.event_id is not None:
        what = "eventbridge-id:" + notice.event_id
    else:
        what = "eventbridge-body:" + hashlib.sha256(body).hexdigest()
    return hashlib.sha256(what.encode()).hexdigest()


def receive(
    headers: Mapping[str, str], body: bytes, auth: WebhookAuth, now: float, *, aws_provider: str = "aws"
) -> InterruptionNotice:
    """Authenticate first (nothing unauthenticated is parsed), then parse, then apply the path's rules."""
    try:
        if len(body) > MAX_BODY_BYTES:
            raise WebhookRejected(f"body is {len(body)} bytes; the limit is {MAX_BODY_BYTES}", 413)
        method = authenticate(headers, body, auth, now)
        notice = parse_notice(headers, body, aws_provider=aws_provider)
        if method is AuthMethod.EVENTBRIDGE_TOKEN:
            if notice.source is not NoticeSource.AWS_EVENTBRIDGE:
                raise WebhookRejected("the EventBridge token only admits EventBridge events; agents must sign", 401)
            # The token is static, so the event's own time is what bounds a replay.
            assert notice.issued_epoch is not None
            check_fresh(notice.issued_epoch, now, auth.window, "EventBridge event time")
    except WebhookRejected as exc:
        log.warning("interruption webhook rejected (%d): %s", exc.status, exc.reason)
        raise
    log.info(
        "interruption notice from %s: %s %s (key %s) action=%s deadline=%s",
        notice.source.value,
        notice.provider,
        notice.provider_instance_id,
        notice.key,
        notice.action.value,
        notice.deadline_epoch,
    )
    return notice
