"""The daemon's interruption endpoint, in-process: verify, parse, and mark the instance in the store."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from sqlalchemy.pool import StaticPool
from starlette.applications import Starlette
from starlette.routing import Route

from scalectl.clocks import FakeClock
from scalectl.controller.store.db import make_engine, make_sessionmaker
from scalectl.controller.store.models import Base, WebhookSeen
from scalectl.controller.store.repository import NoticeMismatch
from scalectl.controller.webhooks import sign
from scalectl.controller.webhooks.http import make_handler
from scalectl.providers.secrets import Secret
from tests.unit.webhooks.test_notice import EVENT_EPOCH, rebalance, spot_warning

SECRET = "agent-hmac-secret-0123456789abcdef"
TOKEN = "eventbridge-token-fedcba9876543210"


class FakeStore:
    """Like the store's mark_notice: returns the key of a live instance it matched, else None. The
    replay guard's table is real (SQLite in memory), as the endpoint uses the store's sessions."""

    def __init__(self, live: dict[tuple[str, str], str]) -> None:
        self.live = live  # (provider name, provider id) -> key
        self.marked: list[tuple[str, str | None, str | None, float]] = []
        engine = make_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
        Base.metadata.create_all(engine, tables=[WebhookSeen.__table__])  # type: ignore[list-item]
        self.sessions = make_sessionmaker(engine)
        self.failures = self  # the store's failure concern (``store.failures.mark_notice``) is this fake too

    def mark_notice(self, provider: str, provider_id: str | None, key: str | None, now: float) -> str | None:
        self.marked.append((provider, provider_id, key, now))
        if key is not None:
            owner = next(((p, i) for (p, i), k in self.live.items() if k == key), None)
            if owner is not None and owner[0] != provider:
                raise NoticeMismatch(f"the notice names {provider} but instance {key} is {owner[0]} {owner[1]}")
            return key if owner is not None else None
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


def _signed(body: bytes, ts: str, secret: str = SECRET) -> dict[str, str]:
    return {"X-Scalectl-Timestamp": ts, "X-Scalectl-Signature": sign(Secret(secret), ts, body)}


async def test_a_replayed_signed_notice_is_refused_even_with_another_spelling_of_the_signature() -> None:
    clock = FakeClock()
    store = FakeStore({("sp", "dep-9"): "sc-batch-9"})
    client = _client(_daemon(store, clock))
    body = json.dumps({"provider": "sp", "key": "sc-batch-9", "action": "terminate"}).encode()
    headers = _signed(body, str(int(clock.now())))
    first = await client.post("/v1/webhooks/interruption", content=body, headers=headers)
    again = await client.post("/v1/webhooks/interruption", content=body, headers=headers)
    upper = {**headers, "X-Scalectl-Signature": headers["X-Scalectl-Signature"].upper().replace("SHA256=", "sha256=")}
    shouted = await client.post("/v1/webhooks/interruption", content=body, headers=upper)
    assert first.status_code == 202
    assert (again.status_code, shouted.status_code) == (409, 409) and "replays are refused" in again.json()["error"]
    assert len(store.marked) == 1
    clock.advance(1)  # the same notice signed anew (a fresh timestamp) is a new request
    fresh = await client.post("/v1/webhooks/interruption", content=body, headers=_signed(body, str(int(clock.now()))))
    assert fresh.status_code == 202


async def test_a_replayed_eventbridge_event_is_refused_by_its_event_id() -> None:
    store = FakeStore({("aws-east", "i-1234567890abcdef0"): "sc-batch-3"})
    client = _client(_daemon(store, FakeClock(EVENT_EPOCH + 3)))
    headers = {"Content-Type": "application/json", "X-Scalectl-EventBridge-Token": TOKEN}
    first = await client.post("/v1/webhooks/interruption", content=json.dumps(spot_warning()), headers=headers)
    respaced_body = json.dumps(spot_warning(), indent=2)
    respaced = await client.post("/v1/webhooks/interruption", content=respaced_body, headers=headers)
    assert (first.status_code, respaced.status_code) == (202, 409)


async def test_a_notice_naming_another_provider_account_changes_nothing() -> None:
    clock = FakeClock()
    store = FakeStore({("sp", "dep-9"): "sc-batch-9"})
    client = _client(_daemon(store, clock))
    body = json.dumps({"provider": "aws-east", "key": "sc-batch-9", "action": "terminate"}).encode()
    reply = await client.post("/v1/webhooks/interruption", content=body, headers=_signed(body, str(int(clock.now()))))
    assert reply.status_code == 422 and "sc-batch-9 is sp" in reply.json()["error"]


async def test_a_notice_refused_while_starting_may_be_sent_again() -> None:
    clock = FakeClock(EVENT_EPOCH + 3)
    store = FakeStore({("aws-east", "i-1234567890abcdef0"): "sc-batch-3"})
    daemon = _daemon(store, clock)
    controller, daemon.controller = daemon.controller, None
    headers = {"X-Scalectl-EventBridge-Token": TOKEN}
    client = _client(daemon)
    early = await client.post("/v1/webhooks/interruption", content=json.dumps(spot_warning()), headers=headers)
    daemon.controller = controller
    later = await client.post("/v1/webhooks/interruption", content=json.dumps(spot_warning()), headers=headers)
    assert (early.status_code, later.status_code) == (503, 202)


async def test_a_chunked_body_past_the_limit_is_refused_without_reading_the_rest() -> None:
    store = FakeStore({})
    sent: list[int] = []

    async def chunks() -> Any:
        for _ in range(10_000):  # 640 MB if all of it were read
            sent.append(1)
            yield b"x" * 65_536

    reply = await _client(_daemon(store, FakeClock(EVENT_EPOCH))).post(
        "/v1/webhooks/interruption", content=chunks(), headers={"X-Scalectl-EventBridge-Token": TOKEN}
    )
    assert reply.status_code == 413 and len(sent) <= 3
