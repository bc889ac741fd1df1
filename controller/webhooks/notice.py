"""Interruption notices: what a webhook body says, parsed into one value. Pure: no I/O, no clock.

Two shapes are understood:

* an AWS EventBridge event from ``aws.ec2``: "EC2 Spot Instance Interruption Warning" (the machine goes
  two minutes after the event's ``time``) or "EC2 Instance Rebalance Recommendation" (elevated risk,
  no deadline);
* the generic notice an agent on the instance posts after watching its metadata endpoint:
  ``{"provider", "key", "instance_id", "action", "deadline"}``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scalectl.providers.tagging import validate_key

MAX_JSON_DEPTH = 16  # our notices nest 2 deep, EventBridge events 3; deeper is refused before parsing
AWS_SPOT_NOTICE_SECONDS = 120.0  # EC2 gives a two-minute warning before reclaiming a spot instance
SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
_EC2_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


class NoticeAction(StrEnum):
    TERMINATE = "terminate"
    STOP = "stop"
    HIBERNATE = "hibernate"
    REBALANCE = "rebalance"  # advisory: elevated risk of interruption, no deadline

    @property
    def loses_instance(self) -> bool:
        return self is not NoticeAction.REBALANCE


_SPOT_ACTIONS = {a.value: a for a in (NoticeAction.TERMINATE, NoticeAction.STOP, NoticeAction.HIBERNATE)}


class NoticeSource(StrEnum):
    AWS_EVENTBRIDGE = "aws-eventbridge"
    AGENT = "agent"


@dataclass(frozen=True, slots=True)
class InterruptionNotice:
    provider: str  # the provider account name (agent) or the provider type "aws" (EventBridge)
    provider_instance_id: str | None
    key: str | None  # our idempotency key, when the sender knows it
    action: NoticeAction
    deadline_epoch: float | None  # when the machine goes, epoch seconds; None: not said
    source: NoticeSource
    issued_epoch: float | None = None  # when the event was emitted (EventBridge ``time``)
    event_id: str | None = None  # EventBridge's unique event ``id``, what a replay repeats

    @property
    def dedupe_key(self) -> str:
        """Same notice delivered twice (retries, two senders) -> same string."""
        return f"{self.provider}:{self.provider_instance_id or ''}:{self.key or ''}:{self.action.value}"


class WebhookRejected(Exception):
    """Why a webhook request was refused, and the HTTP status to answer with. Never carries secrets."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason = reason
        self.status = status


class _AgentNotice(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    provider: str = Field(min_length=1, max_length=64)
    key: str | None = Field(None, max_length=63)
    instance_id: str | None = Field(None, min_length=1, max_length=128)
    action: Literal["terminate", "stop", "hibernate", "rebalance"]
    deadline: Any = None  # epoch seconds or ISO 8601; checked by _timestamp for a clearer message


def parse_notice(headers: Mapping[str, str], body: bytes, *, aws_provider: str = "aws") -> InterruptionNotice:
    """Parse a webhook body (already authenticated) into an InterruptionNotice, or raise WebhookRejected."""
    content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "application/json")
    if "json" not in content_type.lower():
        raise WebhookRejected(f"expected a JSON body, got content-type {content_type[:60]!r}", 415)
    if nesting_exceeds(body, MAX_JSON_DEPTH):
        raise WebhookRejected(f"body nests JSON deeper than {MAX_JSON_DEPTH} levels")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise WebhookRejected(f"body is not valid JSON: {str(exc)[:120]}") from None
    if not isinstance(doc, dict):
        raise WebhookRejected("body must be a JSON object")
    if "detail-type" in doc or ("source" in doc and "detail" in doc):
        return _eventbridge(doc, aws_provider)
    if "action" in doc:
        return _agent(doc)
    raise WebhookRejected(
        "unrecognised notice: expected an EventBridge event (with detail-type) or an agent notice (with action)",
        422,
    )


def nesting_exceeds(body: bytes, limit: int) -> bool:
    """Whether JSON text opens more than ``limit`` arrays/objects inside each other (strings skipped).

    Checked before ``json.loads``, whose recursion would otherwise end in RecursionError (a 500)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # closing quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def _eventbridge(doc: dict[str, Any], provider: str) -> InterruptionNotice:
    source, kind = doc.get("source"), doc.get("detail-type")
    if source != "aws.ec2":
        raise WebhookRejected(f"unsupported EventBridge source {str(source)[:40]!r}; only aws.ec2 events", 422)
    if kind not in (SPOT_WARNING, REBALANCE):
        raise WebhookRejected(
            f"unsupported EventBridge event type {str(kind)[:80]!r}; supported: {SPOT_WARNING!r}, {REBALANCE!r}", 422
        )
    detail = doc.get("detail")
    if not isinstance(detail, dict):
        raise WebhookRejected("EventBridge event: detail must be an object")
    instance_id = detail.get("instance-id")
    if not isinstance(instance_id, str) or not _EC2_INSTANCE_ID.match(instance_id):
        raise WebhookRejected("EventBridge event: detail.instance-id must be an EC2 instance id like i-0abc12345678")
    issued = _timestamp(doc.get("time"), "EventBridge event: time")
    event_id = doc.get("id") if isinstance(doc.get("id"), str) and 0 < len(doc["id"]) <= 128 else None
    if kind == REBALANCE:
        return InterruptionNotice(
            provider, instance_id, None, NoticeAction.REBALANCE, None, NoticeSource.AWS_EVENTBRIDGE, issued, event_id
        )
    raw_action = detail.get("instance-action")
    action = _SPOT_ACTIONS.get(raw_action) if isinstance(raw_action, str) else None
    if action is None:
        raise WebhookRejected(
            f"EventBridge event: detail.instance-action {str(raw_action)[:20]!r} is not terminate, stop or hibernate"
        )
    deadline = issued + AWS_SPOT_NOTICE_SECONDS
    return InterruptionNotice(
        provider, instance_id, None, action, deadline, NoticeSource.AWS_EVENTBRIDGE, issued, event_id
    )


def _agent(doc: dict[str, Any]) -> InterruptionNotice:
    try:
        notice = _AgentNotice.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise WebhookRejected(f"agent notice: {problems}") from None
    if notice.key is None and notice.instance_id is None:
        raise WebhookRejected("agent notice: give key or instance_id (or both)")
    if notice.key is not None:
        try:
            validate_key(notice.key)
        except ValueError as exc:
            raise WebhookRejected(f"agent notice: {exc}") from None
    deadline = None if notice.deadline is None else _timestamp(notice.deadline, "agent notice: deadline")
    return InterruptionNotice(
        notice.provider, notice.instance_id, notice.key, NoticeAction(notice.action), deadline, NoticeSource.AGENT
    )


def _timestamp(value: Any, what: str) -> float:
    """Epoch seconds from a number or an ISO 8601 string with a zone ("2026-03-01T12:00:00Z")."""
    if isinstance(value, bool):
        raise WebhookRejected(f"{what}: expected epoch seconds or an ISO 8601 time, got a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value <= 0:
            raise WebhookRejected(f"{what}: expected positive epoch seconds")
        return float(value)
    if isinstance(value, str):
        try:
            return _timestamp(float(value), what)  # epoch seconds sent as a string (shell agents)
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise WebhookRejected(f"{what}: {value[:40]!r} is not an ISO 8601 time") from None
        if parsed.tzinfo is None:
            raise WebhookRejected(f"{what}: {value[:40]!r} has no time zone; add Z or an offset")
        return parsed.timestamp()
    raise WebhookRejected(f"{what}: missing")
