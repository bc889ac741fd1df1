"""Interruption webhooks: spot warnings from AWS EventBridge and from agents on the instances.

``receive`` authenticates and parses one request; ``http.make_handler`` mounts it on the daemon's app.
"""

from scalectl.controller.webhooks.auth import AuthMethod, WebhookAuth, WebhookConfigError, authenticate, sign
from scalectl.controller.webhooks.notice import (
    InterruptionNotice,
    NoticeAction,
    NoticeSource,
    WebhookRejected,
    parse_notice,
)
from scalectl.controller.webhooks.receive import receive

__all__ = [
    "AuthMethod",
    "InterruptionNotice",
    "NoticeAction",
    "NoticeSource",
    "WebhookAuth",
    "WebhookConfigError",
    "WebhookRejected",
    "authenticate",
    "parse_notice",
    "receive",
    "sign",
]
