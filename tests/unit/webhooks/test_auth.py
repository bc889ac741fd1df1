"""Webhook authenticity: HMAC over timestamp + body, the replay window, the EventBridge header token."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from pathlib import Path

import pytest

from scalectl.clocks import FakeClock
from scalectl.controller.webhooks import (
    AuthMethod,
    NoticeSource,
    WebhookAuth,
    WebhookConfigError,
    WebhookRejected,
    authenticate,
    receive,
    sign,
)
from scalectl.providers.secrets import Secret
from scalectl.serving.agent import spot_agent_script
from tests.unit.webhooks.test_notice import EVENT_EPOCH, spot_warning

SECRET = "agent-hmac-secret-0123456789abcdef"
TOKEN = "eventbridge-token-fedcba9876543210"
AUTH = WebhookAuth(hmac_secret=Secret(SECRET), eventbridge_token=Secret(TOKEN))
AGENT_BODY = json.dumps({"provider": "aws-east", "key": "sc-batch-7", "action": "terminate"}).encode()


def signed_headers(body: bytes, ts: float, secret: str = SECRET) -> dict[str, str]:
    stamp = str(int(ts))
    return {
        "Content-Type": "application/json",
        "X-Scalectl-Timestamp": stamp,
        "X-Scalectl-Signature": sign(Secret(secret), stamp, body),
    }


def test_valid_signature_is_accepted() -> None:
    clock = FakeClock()
    notice = receive(signed_headers(AGENT_BODY, clock.now()), AGENT_BODY, AUTH, clock.now())
    assert notice.key == "sc-batch-7" and notice.source is NoticeSource.AGENT


def test_headers_are_case_insensitive() -> None:
    now = FakeClock().now()
    headers = {k.lower(): v for k, v in signed_headers(AGENT_BODY, now).items()}
    assert authenticate(headers, AGENT_BODY, AUTH, now) is AuthMethod.HMAC


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda h, b: (h, b + b" "), "does not match"),  # body changed after signing
        (lambda h, b: ({**h, "X-Scalectl-Signature": "sha256=" + "0" * 64}, b), "does not match"),
        (lambda h, b: ({**h, "X-Scalectl-Signature": h["X-Scalectl-Signature"][7:]}, b), "sha256=<hex>"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-Scalectl-Timestamp"}, b), "without X-Scalectl-Timestamp"),
        (lambda h, b: ({**h, "X-Scalectl-Timestamp": "noon"}, b), "epoch seconds"),
        (lambda h, b: ({**h, "X-Scalectl-Timestamp": "nan"}, b), "epoch seconds"),
        (lambda h, b: ({"Content-Type": "application/json"}, b), "unauthenticated"),
    ],
)
def test_bad_signatures_are_rejected(tamper: object, reason: str) -> None:
    now = FakeClock().now()
    headers, body = tamper(signed_headers(AGENT_BODY, now), AGENT_BODY)  # type: ignore[operator]
    with pytest.raises(WebhookRejected, match=reason) as info:
        receive(headers, body, AUTH, now)
    assert info.value.status == 401


def test_signature_with_another_secret_is_rejected() -> None:
    now = FakeClock().now()
    with pytest.raises(WebhookRejected, match="does not match"):
        receive(signed_headers(AGENT_BODY, now, secret="someone-elses-secret-000000"), AGENT_BODY, AUTH, now)


def test_timestamp_is_covered_by_the_signature() -> None:
    """Replaying a captured request with a fresh timestamp header fails: the signature no longer fits."""
    clock = FakeClock()
    captured = signed_headers(AGENT_BODY, clock.now())
    clock.advance(3600)
    replay = {**captured, "X-Scalectl-Timestamp": str(int(clock.now()))}
    with pytest.raises(WebhookRejected, match="does not match"):
        receive(replay, AGENT_BODY, AUTH, clock.now())


@pytest.mark.parametrize(("age", "ok"), [(0, True), (299, True), (-299, True), (301, False), (-301, False)])
def test_replay_window_is_five_minutes_either_side(age: float, ok: bool) -> None:
    signed_at = FakeClock().now()
    headers = signed_headers(AGENT_BODY, signed_at)
    now = signed_at + age  # received this long after (or, with clock skew, before) it was signed
    if ok:
        receive(headers, AGENT_BODY, AUTH, now)
    else:
        with pytest.raises(WebhookRejected, match="outside the ±300s window") as info:
            receive(headers, AGENT_BODY, AUTH, now)
        assert info.value.status == 401


def test_eventbridge_token_admits_fresh_eventbridge_events() -> None:
    body = json.dumps(spot_warning()).encode()
    headers = {"Content-Type": "application/json", "X-Scalectl-EventBridge-Token": TOKEN}
    notice = receive(headers, body, AUTH, EVENT_EPOCH + 5)
    assert notice.source is NoticeSource.AWS_EVENTBRIDGE and notice.provider_instance_id == "i-1234567890abcdef0"
    with pytest.raises(WebhookRejected, match="EventBridge event time") as stale:
        receive(headers, body, AUTH, EVENT_EPOCH + 301)  # a replay of a captured event
    assert stale.value.status == 401


def test_eventbridge_token_rejects_wrong_token_and_agent_bodies() -> None:
    body = json.dumps(spot_warning()).encode()
    with pytest.raises(WebhookRejected, match="token does not match"):
        receive({"X-Scalectl-EventBridge-Token": TOKEN + "x"}, body, AUTH, EVENT_EPOCH)
    with pytest.raises(WebhookRejected, match="agents must sign") as info:
        receive({"X-Scalectl-EventBridge-Token": TOKEN}, AGENT_BODY, AUTH, EVENT_EPOCH)
    assert info.value.status == 401


def test_paths_that_are_not_configured_are_refused() -> None:
    now = FakeClock().now()
    only_hmac = WebhookAuth(hmac_secret=Secret(SECRET))
    with pytest.raises(WebhookRejected, match="EventBridge notices are not enabled"):
        receive({"X-Scalectl-EventBridge-Token": TOKEN}, b"{}", only_hmac, now)
    only_eb = WebhookAuth(eventbridge_token=Secret(TOKEN))
    with pytest.raises(WebhookRejected, match="signed notices are not enabled"):
        receive(signed_headers(AGENT_BODY, now), AGENT_BODY, only_eb, now)
    with pytest.raises(WebhookRejected, match="not configured") as info:
        receive(signed_headers(AGENT_BODY, now), AGENT_BODY, WebhookAuth(), now)
    assert info.value.status == 503


def test_authentication_comes_before_parsing() -> None:
    """An unauthenticated body is never parsed: garbage without a signature is a 401, not a 400."""
    with pytest.raises(WebhookRejected) as info:
        receive({}, b"{not json", AUTH, FakeClock().now())
    assert info.value.status == 401


def test_oversized_body_is_refused() -> None:
    body = b" " * (64 * 1024 + 1)
    with pytest.raises(WebhookRejected) as info:
        receive(signed_headers(body, FakeClock().now()), body, AUTH, FakeClock().now())
    assert info.value.status == 413


def test_secrets_never_in_reasons_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    now = FakeClock().now()
    good = signed_headers(AGENT_BODY, now)
    attempts = [
        (good, AGENT_BODY + b"x"),
        ({**good, "X-Scalectl-Timestamp": str(int(now) - 999)}, AGENT_BODY),
        ({"X-Scalectl-EventBridge-Token": TOKEN[:-1] + "?"}, b"{}"),
    ]
    reasons = []
    for headers, body in attempts:
        with pytest.raises(WebhookRejected) as info:
            receive(headers, body, AUTH, now)
        reasons.append(str(info.value))
    receive(good, AGENT_BODY, AUTH, now)
    texts = reasons + [r.getMessage() for r in caplog.records] + [repr(AUTH), str(AUTH)]
    for text in texts:
        assert SECRET not in text and TOKEN not in text
        assert good["X-Scalectl-Signature"][7:] not in text


def test_from_env_and_files(tmp_path: Path) -> None:
    secret_file = tmp_path / "webhook.secret"
    secret_file.write_text(SECRET + "\n")
    auth = WebhookAuth.from_env(
        environ={"SCALECTL_WEBHOOK_SECRET_FILE": str(secret_file), "SCALECTL_EVENTBRIDGE_TOKEN": TOKEN}
    )
    assert auth.hmac_secret is not None and auth.hmac_secret.reveal() == SECRET
    assert auth.eventbridge_token is not None and auth.eventbridge_token.reveal() == TOKEN
    assert not WebhookAuth.from_env(environ={}).enabled
    with pytest.raises(WebhookConfigError, match="shorter than 16"):
        WebhookAuth.from_env(environ={"SCALECTL_WEBHOOK_SECRET": "short"})
    with pytest.raises(WebhookConfigError, match="cannot read"):
        WebhookAuth.from_env(environ={"SCALECTL_WEBHOOK_SECRET_FILE": str(tmp_path / "missing")})


DOC = Path(__file__).resolve().parents[3] / "docs" / "webhooks.md"


def _agent_script() -> str:
    return spot_agent_script()


def test_the_docs_show_the_agent_that_ships() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("```sh\n#!/bin/sh")
    assert text[start + len("```sh\n") : text.index("```", start + 5)] == spot_agent_script()


def test_the_documented_agent_is_valid_shell() -> None:
    subprocess.run(["sh", "-n"], input=_agent_script(), text=True, check=True, timeout=10)


def test_the_documented_agent_signature_verifies() -> None:
    """Run the agent's own signing line (from docs/webhooks.md) with openssl; the daemon must accept it."""
    assert shutil.which("openssl"), "openssl is needed to check the documented agent"
    (line,) = [ln.strip() for ln in _agent_script().splitlines() if ln.strip().startswith("sig=$(")]
    command = line[len("sig=$(") : -1]
    ts = str(int(FakeClock().now()))
    out = subprocess.run(
        ["sh", "-c", command],
        env={"ts": ts, "body": AGENT_BODY.decode(), "SCALECTL_WEBHOOK_SECRET": SECRET, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    headers = {"X-Scalectl-Timestamp": ts, "X-Scalectl-Signature": f"sha256={out.stdout.strip()}"}
    assert authenticate(headers, AGENT_BODY, AUTH, float(ts)) is AuthMethod.HMAC
