"""Parsing interruption notices: EventBridge events (as AWS documents them) and agent notices."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from scalectl.controller.webhooks import InterruptionNotice, NoticeAction, NoticeSource, WebhookRejected, parse_notice
from scalectl.controller.webhooks.notice import MAX_JSON_DEPTH, nesting_exceeds

JSON = {"Content-Type": "application/json; charset=utf-8"}
EVENT_TIME = "2026-03-01T12:00:00Z"
EVENT_EPOCH = datetime(2026, 3, 1, 12, tzinfo=UTC).timestamp()


def spot_warning(**detail: Any) -> dict[str, Any]:
    # The example event from the EC2 user guide ("Spot Instance interruption notices"), with our values.
    return {
        "version": "0",
        "id": "12345678-1234-1234-1234-123456789012",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": EVENT_TIME,
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1b:instance/i-1234567890abcdef0"],
        "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate", **detail},
    }


def rebalance() -> dict[str, Any]:
    return {
        "version": "0",
        "id": "12345678-1234-1234-1234-123456789012",
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": EVENT_TIME,
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1b:instance/i-1234567890abcdef0"],
        "detail": {"instance-id": "i-1234567890abcdef0"},
    }


def parse(doc: Any, headers: dict[str, str] | None = None) -> InterruptionNotice:
    return parse_notice(JSON if headers is None else headers, json.dumps(doc).encode())


def test_spot_interruption_warning() -> None:
    notice = parse(spot_warning())
    assert notice == InterruptionNotice(
        provider="aws",
        provider_instance_id="i-1234567890abcdef0",
        key=None,
        action=NoticeAction.TERMINATE,
        deadline_epoch=EVENT_EPOCH + 120,
        source=NoticeSource.AWS_EVENTBRIDGE,
        issued_epoch=EVENT_EPOCH,
        event_id="12345678-1234-1234-1234-123456789012",
    )
    assert notice.action.loses_instance


@pytest.mark.parametrize("action", ["stop", "hibernate"])
def test_spot_warning_other_actions(action: str) -> None:
    assert parse(spot_warning(**{"instance-action": action})).action is NoticeAction(action)


def test_rebalance_recommendation_is_advisory() -> None:
    notice = parse(rebalance())
    assert notice.action is NoticeAction.REBALANCE and not notice.action.loses_instance
    assert notice.deadline_epoch is None and notice.provider_instance_id == "i-1234567890abcdef0"


def test_aws_provider_name_can_be_chosen() -> None:
    body = json.dumps(spot_warning()).encode()
    assert parse_notice(JSON, body, aws_provider="aws-prod").provider == "aws-prod"


def test_agent_notice_with_iso_and_epoch_deadlines() -> None:
    iso = parse({"provider": "aws-east", "key": "sc-batch-7", "action": "terminate", "deadline": EVENT_TIME})
    assert iso == InterruptionNotice(
        "aws-east", None, "sc-batch-7", NoticeAction.TERMINATE, EVENT_EPOCH, NoticeSource.AGENT
    )
    epoch = parse({"provider": "gcp", "instance_id": "1234567", "action": "terminate", "deadline": 1772366430.5})
    assert epoch.deadline_epoch == 1772366430.5 and epoch.key is None and epoch.provider_instance_id == "1234567"
    quoted = parse({"provider": "gcp", "instance_id": "1234567", "action": "terminate", "deadline": "1772366430"})
    assert quoted.deadline_epoch == 1772366430.0
    none = parse({"provider": "vast", "key": "sc-batch-8", "action": "stop", "extra": "ignored"})
    assert none.deadline_epoch is None


def test_same_notice_has_the_same_dedupe_key() -> None:
    assert parse(spot_warning()).dedupe_key == parse(spot_warning()).dedupe_key
    assert parse(spot_warning()).dedupe_key != parse(rebalance()).dedupe_key


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"\xff\xfe", 400, "not valid JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (b'{"hello": "world"}', 422, "unrecognised notice"),
    ],
)
def test_malformed_bodies(body: bytes, status: int, reason: str) -> None:
    with pytest.raises(WebhookRejected, match=reason) as info:
        parse_notice(JSON, body)
    assert info.value.status == status


def test_non_json_content_type_is_refused() -> None:
    with pytest.raises(WebhookRejected, match="content-type") as info:
        parse_notice({"content-type": "text/plain"}, json.dumps(spot_warning()).encode())
    assert info.value.status == 415


@pytest.mark.parametrize(
    ("mutate", "status", "reason"),
    [
        (lambda d: d.update({"detail-type": "EC2 Instance State-change Notification"}), 422, "unsupported EventBridge"),
        (lambda d: d.update({"source": "aws.autoscaling"}), 422, "unsupported EventBridge source"),
        (lambda d: d.update({"detail": "nope"}), 400, "detail must be an object"),
        (lambda d: d["detail"].update({"instance-id": "sc-batch-1"}), 400, "instance-id"),
        (lambda d: d["detail"].pop("instance-id"), 400, "instance-id"),
        (lambda d: d["detail"].update({"instance-action": "explode"}), 400, "instance-action"),
        (lambda d: d["detail"].pop("instance-action"), 400, "instance-action"),
        (lambda d: d.update({"time": "yesterday"}), 400, "ISO 8601"),
        (lambda d: d.update({"time": "2026-03-01T12:00:00"}), 400, "no time zone"),
        (lambda d: d.pop("time"), 400, "time: missing"),
    ],
)
def test_bad_eventbridge_events(mutate: Any, status: int, reason: str) -> None:
    doc = spot_warning()
    mutate(doc)
    with pytest.raises(WebhookRejected, match=reason) as info:
        parse(doc)
    assert info.value.status == status


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"key": "sc-a-1", "action": "terminate"}, "provider: Field required"),
        ({"provider": "aws", "action": "terminate"}, "give key or instance_id"),
        ({"provider": "aws", "key": "sc-a-1", "action": "melt"}, "action: Input should be"),
        ({"provider": "aws", "key": "NOT A KEY", "action": "terminate"}, "invalid instance key"),
        ({"provider": "aws", "key": "sc-a-1", "action": "terminate", "deadline": True}, "boolean"),
        ({"provider": "aws", "key": "sc-a-1", "action": "terminate", "deadline": -5}, "positive epoch"),
        ({"provider": "aws", "key": "sc-a-1", "action": "terminate", "deadline": "soon"}, "ISO 8601"),
        ({"provider": "", "key": "sc-a-1", "action": "terminate"}, "provider"),
    ],
)
def test_bad_agent_notices(doc: dict[str, Any], reason: str) -> None:
    with pytest.raises(WebhookRejected, match=reason) as info:
        parse(doc)
    assert info.value.status == 400


def test_json_nested_deeper_than_the_bound_is_a_400_not_a_recursion_error() -> None:
    for depth in (MAX_JSON_DEPTH + 1, 10_000, 100_000):
        body = b'{"action": ' + b"[" * depth + b"]" * depth + b"}"
        with pytest.raises(WebhookRejected) as info:
            parse_notice(JSON, body)
        assert info.value.status == 400 and "deeper than" in info.value.reason


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    assert not nesting_exceeds(json.dumps({"key": "[" * 500, "x": '\\"{' * 50}).encode(), MAX_JSON_DEPTH)
    assert nesting_exceeds(b"[" * (MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)
    assert not nesting_exceeds(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, MAX_JSON_DEPTH)
