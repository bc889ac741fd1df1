"""Is this webhook request really from us (an agent) or from our EventBridge rule?

Two ways in:

* HMAC (agents, relays): ``X-Scalectl-Timestamp: <epoch seconds>`` and
  ``X-Scalectl-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>." + raw body>``. The timestamp is
  inside the signature, so a captured request cannot be replayed with a fresh timestamp; requests
  outside a 5-minute window are refused.
* EventBridge API destinations can't sign bodies; their connection sends a fixed header
  (``X-Scalectl-EventBridge-Token``) holding a second shared secret. That path only admits
  EventBridge events, and the event's own ``time`` must be inside the same window.

Comparisons are constant-time; neither secret nor signature ever appears in a reason or a log line.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from scalectl.controller.webhooks.notice import WebhookRejected
from scalectl.providers.secrets import MissingCredential, Secret, load_secret

SIGNATURE_HEADER = "x-scalectl-signature"
TIMESTAMP_HEADER = "x-scalectl-timestamp"
EVENTBRIDGE_HEADER = "x-scalectl-eventbridge-token"
DEFAULT_SECRET_ENV = "SCALECTL_WEBHOOK_SECRET"
DEFAULT_EVENTBRIDGE_ENV = "SCALECTL_EVENTBRIDGE_TOKEN"
MIN_SECRET_LENGTH = 16
REPLAY_WINDOW = 300.0


class AuthMethod(StrEnum):
    HMAC = "hmac"
    EVENTBRIDGE_TOKEN = "eventbridge-token"


class WebhookConfigError(ValueError):
    """A webhook secret is configured but unusable (unreadable file, too short)."""


@dataclass(frozen=True)
class WebhookAuth:
    hmac_secret: Secret | None = None
    eventbridge_token: Secret | None = None
    window: float = REPLAY_WINDOW  # seconds either side of now

    def __post_init__(self) -> None:
        for what, secret in (("webhook secret", self.hmac_secret), ("EventBridge token", self.eventbridge_token)):
            if secret is not None and len(secret.reveal()) < MIN_SECRET_LENGTH:
                raise WebhookConfigError(
                    f"{what} is shorter than {MIN_SECRET_LENGTH} characters; use e.g. `openssl rand -hex 32`"
                )

    @property
    def enabled(self) -> bool:
        return self.hmac_secret is not None or self.eventbridge_token is not None

    @classmethod
    def from_env(
        cls,
        *,
        secret_env: str = DEFAULT_SECRET_ENV,
        secret_file: str | Path | None = None,
        eventbridge_env: str = DEFAULT_EVENTBRIDGE_ENV,
        eventbridge_file: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> WebhookAuth:
        """Secrets from files (``*_FILE`` env vars or arguments) or env vars; an unset one disables its path."""
        env = os.environ if environ is None else environ
        return cls(
            hmac_secret=_optional_secret(
                secret_env, secret_file or env.get(f"{secret_env}_FILE"), env, "webhook secret"
            ),
            eventbridge_token=_optional_secret(
                eventbridge_env, eventbridge_file or env.get(f"{eventbridge_env}_FILE"), env, "EventBridge token"
            ),
        )


def _optional_secret(env_name: str, file: str | Path | None, env: Mapping[str, str], what: str) -> Secret | None:
    if file:
        try:
            return load_secret(file=file, what=what)
        except MissingCredential as exc:
            raise WebhookConfigError(str(exc)) from None
    value = env.get(env_name, "").strip()
    return Secret(value) if value else None


def sign(secret: Secret, timestamp: str, body: bytes) -> str:
    """The ``X-Scalectl-Signature`` value for ``body`` sent at ``timestamp`` (what agents compute)."""
    digest = hmac.new(secret.reveal().encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def authenticate(headers: Mapping[str, str], body: bytes, auth: WebhookAuth, now: float) -> AuthMethod:
    """Which way the request proved itself, or WebhookRejected (401/503) with the reason."""
    h = {k.lower(): v for k, v in headers.items()}
    if not auth.enabled:
        raise WebhookRejected(
            f"interruption webhooks are not configured: set {DEFAULT_SECRET_ENV} and/or {DEFAULT_EVENTBRIDGE_ENV}", 503
        )
    if SIGNATURE_HEADER in h:
        if auth.hmac_secret is None:
            raise WebhookRejected(f"signed notices are not enabled: set {DEFAULT_SECRET_ENV}", 401)
        _check_signature(h, body, auth.hmac_secret, now, auth.window)
        return AuthMethod.HMAC
    if EVENTBRIDGE_HEADER in h:
        if auth.eventbridge_token is None:
            raise WebhookRejected(f"EventBridge notices are not enabled: set {DEFAULT_EVENTBRIDGE_ENV}", 401)
        given = h[EVENTBRIDGE_HEADER].strip().encode()
        if not hmac.compare_digest(given, auth.eventbridge_token.reveal().encode()):
            raise WebhookRejected("EventBridge token does not match", 401)
        return AuthMethod.EVENTBRIDGE_TOKEN
    raise WebhookRejected(
        "unauthenticated: send X-Scalectl-Signature + X-Scalectl-Timestamp, or the EventBridge token header", 401
    )


def check_fresh(issued: float, now: float, window: float, what: str) -> None:
    if abs(now - issued) > window:
        raise WebhookRejected(
            f"{what} is {now - issued:+.0f}s from now, outside the ±{window:.0f}s window (replayed or clock skew)", 401
        )


def _check_signature(h: Mapping[str, str], body: bytes, secret: Secret, now: float, window: float) -> None:
    raw_ts = h.get(TIMESTAMP_HEADER)
    if raw_ts is None:
        raise WebhookRejected("signed notice without X-Scalectl-Timestamp", 401)
    try:
        ts = float(raw_ts)
    except ValueError:
        raise WebhookRejected("X-Scalectl-Timestamp must be epoch seconds", 401) from None
    if not math.isfinite(ts):
        raise WebhookRejected("X-Scalectl-Timestamp must be epoch seconds", 401)
    check_fresh(ts, now, window, "X-Scalectl-Timestamp")
    given = h[SIGNATURE_HEADER].strip()
    if not given.startswith("sha256="):
        raise WebhookRejected("X-Scalectl-Signature must look like sha256=<hex>", 401)
    expected = sign(secret, raw_ts, body)
    if not hmac.compare_digest(given.lower().encode(), expected.encode()):
        raise WebhookRejected("signature does not match the body", 401)
