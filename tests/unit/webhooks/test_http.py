"""The daemon's interruption endpoint, in-process: verify, parse, and mark the instance in the store."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from clocks import FakeClock
from controller.webhooks import sign
from controller.webhooks.http import make_handler
from providers.secrets import Secret
from tests.unit.webhooks.test_notice import EVENT_EPOCH, rebalance, spot_warning

SECRET = "agent-hmac-secret-0123456789abcdef"
TOKEN = "eventbridge-token-fedcba9876543210"


class FakeStore:
    """Like the store's mark_notice: returns the key of a live instance it matched, else None."""

    def __init__(self, live: dict[tuple[str, str], str]) -> None:
        self.live = live  # (provider name, provider id) -> key
        self.marked: list[tuple[str, str | None, str | None, float]] = []

    def mark_notice(self, provider: str, provider_id: str | None, key: str | None, now: float) -> str | None:
        self.marked.append((provider, provider_id, key, now))
        if key is not None:
            return key if key in self.live.values() else None
        return self.live.get((provider, provider_id or ""))


def _daemon(store: FakeStore, clock: FakeClock, *, started: bool = True) -> Any:
    providers = {
        "aws-west": SimpleNamespace(type="aws"),
        "aws-east": SimpleNamespace(type="aws"),
        "sp": SimpleNamespace(type="spheron"),
    }
    controller = SimpleNamespace(fleet=SimpleNamespace(providers=providers), store=store) if started else None
    settings = SimpleNamespace(webhook_secret_env="TEST_WEBHOOK_SECRET", webhook_secret_file=None)
    return SimpleNamespace(settings=settings, clock=clock, controller=controller)


class _Client:
    """The endpoint mounted on a Starlette app, called in-process through httpx's ASGI transport."""

    def __init__(self, daemon: Any) -> None:
        self.app = Starlette(routes=[Route("/v1/webhooks/interruption", make_handler(daemon), methods=["POST"])])

    async def post(self, path: str, *, content: bytes | str, headers: dict[str, str]) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://scalectl.invalid") as client:
            return await client.post(path, content=content, headers=headers)


def _client(daemon: Any) -> _Client:
    return _Client(daemon)


@pytest.fixture(autouse=True)
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("SCALECTL_EVENTBRIDGE_TOKEN", TOKEN)


async def test_eventbridge_warning_marks_the_instance_in_the_aws_account_that_has_it() -> None:
    clock = FakeClock(EVENT_EPOCH + 3)
    store = FakeStore({("aws-east", "i-1234567890abcdef0"): "sc-batch-3"})
    reply = await _client(_daemon(store, clock)).post(
        "/v1/webhooks/interruption",
        content=json.dumps(spot_warning()),
        headers={"Content-Type": "application/json", "X-Scalectl-EventBridge-Token": TOKEN},
    )
    assert reply.status_code == 202
    assert reply.json() == {"accepted": True, "action": "terminate", "instance": "sc-batch-3", "acted": True}
    assert [m[0] for m in store.marked] == ["aws-west", "aws-east"]  # only aws accounts, until one matched


async def test_signed_agent_notice_marks_by_key() -> None:
    clock = FakeClock()
    store = FakeStore({("sp", "dep-9"): "sc-batch-9"})
    body = json.dumps({"provider": "sp", "key": "sc-batch-9", "action": "terminate"}).encode()
    ts = str(int(clock.now()))
    reply = await _client(_daemon(store, clock)).post(
        "/v1/webhooks/interruption",
        content=body,
        headers={"X-Scalectl-Timestamp": ts, "X-Scalectl-Signature": sign(Secret(SECRET), ts, body)},
    )
    assert reply.status_code == 202 and reply.json()["instance"] == "sc-batch-9"
    assert store.marked == [("sp", None, "sc-batch-9", clock.now())]


async def test_rebalance_is_acknowledged_without_acting() -> None:
    store = FakeStore({("aws-east", "i-1234567890abcdef0"): "sc-batch-3"})
    reply = await _client(_daemon(store, FakeClock(EVENT_EPOCH))).post(
        "/v1/webhooks/interruption", content=json.dumps(rebalance()), headers={"X-Scalectl-EventBridge-Token": TOKEN}
    )
    assert reply.status_code == 202 and reply.json()["acted"] is False
    assert store.marked == []


async def test_rejections_carry_status_and_reason_but_no_secret() -> None:
    store = FakeStore({})
    client = _client(_daemon(store, FakeClock(EVENT_EPOCH)))
    bad = await client.post(
        "/v1/webhooks/interruption",
        content=json.dumps(spot_warning()),
        headers={"X-Scalectl-EventBridge-Token": "x" * 20},
    )
    assert bad.status_code == 401 and bad.json() == {"error": "EventBridge token does not match"}
    unknown = await client.post(
        "/v1/webhooks/interruption",
        content=json.dumps({**spot_warning(), "detail-type": "AWS Health Event"}),
        headers={"X-Scalectl-EventBridge-Token": TOKEN},
    )
    assert unknown.status_code == 422 and "unsupported EventBridge event type" in unknown.json()["error"]
    huge = await client.post(
        "/v1/webhooks/interruption", content=b"x" * 70_000, headers={"X-Scalectl-EventBridge-Token": TOKEN}
    )
    assert huge.status_code == 413
    assert store.marked == []
    assert all(TOKEN not in r.text and SECRET not in r.text for r in (bad, unknown, huge))


async def test_daemon_still_starting_answers_503() -> None:
    reply = await _client(_daemon(FakeStore({}), FakeClock(EVENT_EPOCH), started=False)).post(
        "/v1/webhooks/interruption", content=json.dumps(spot_warning()), headers={"X-Scalectl-EventBridge-Token": TOKEN}
    )
    assert reply.status_code == 503 and "starting" in reply.json()["error"]


async def test_unconfigured_webhooks_answer_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_WEBHOOK_SECRET")
    monkeypatch.delenv("SCALECTL_EVENTBRIDGE_TOKEN")
    reply = await _client(_daemon(FakeStore({}), FakeClock(EVENT_EPOCH))).post(
        "/v1/webhooks/interruption", content=json.dumps(spot_warning()), headers={"X-Scalectl-EventBridge-Token": TOKEN}
    )
    assert reply.status_code == 503 and "not configured" in reply.json()["error"]
