"""A seeded fuzz of the daemon's interruption webhook: 10,000+ invalid requests against the real ASGI app
(``build_http_app`` + ``make_handler``) and a real store. Not one may answer 5xx, none may be accepted,
and the store must be exactly as before; one valid notice at the end proves the setup can change it."""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from scalectl.clocks import FakeClock
from scalectl.controller.http_app import Health, build_http_app
from scalectl.controller.metrics import DaemonMetrics
from scalectl.controller.store import migrate
from scalectl.controller.store.models import EventRecord, InstanceRecord, WebhookSeen
from scalectl.controller.store.repository import Store
from scalectl.controller.webhooks import sign
from scalectl.controller.webhooks.http import make_handler
from scalectl.controller.webhooks.notice import MAX_JSON_DEPTH
from scalectl.controller.webhooks.receive import MAX_BODY_BYTES
from scalectl.providers.secrets import Secret
from scalectl.tiers.config import parse_config
from tests.builders import ready_instance_row

SECRET = "fuzz-agent-secret-0123456789abcdef"
TOKEN = "fuzz-eventbridge-token-0123456789"
NOW = 1_790_000_000.0
URL = "/v1/webhooks/interruption"
REQUESTS = 10_000
TIERS = """
tiers:
  web:
    capacity: spot
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 0
    max: 4
    policy: {kind: min-floor, floor: 0}
"""
SP_KEY, SP_ID = "sc-web-00000001", "dep-1"
AWS_KEY, AWS_ID = "sc-web-00000002", "i-0123456789abcdef0"
VALID_ACTIONS = ("terminate", "stop", "hibernate", "rebalance")


def _fingerprint(store: Store) -> tuple[Any, ...]:
    with store.sessions() as s:
        rows = s.execute(
            select(InstanceRecord.key, InstanceRecord.state, InstanceRecord.notice_at, InstanceRecord.provider_id)
        ).all()
        events = s.scalar(select(func.count()).select_from(EventRecord))
        seen = sorted(s.scalars(select(WebhookSeen.digest)).all())
    return tuple(sorted(rows)), events, tuple(seen)


def _signed(body: bytes, ts: float = NOW) -> dict[str, str]:
    stamp = str(int(ts))
    return {
        "Content-Type": "application/json",
        "X-Scalectl-Timestamp": stamp,
        "X-Scalectl-Signature": sign(Secret(SECRET), stamp, body),
    }


def _event(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-09-21T14:13:20Z",
        "region": "us-east-1",
        "detail": {"instance-id": AWS_ID, "instance-action": "terminate"},
    }
    doc.update(changes)
    return doc


class Fuzz:
    """Invalid requests, each as (kind, body, headers); every one of them must be refused."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def text(self, n: int | None = None) -> str:
        alphabet = string.printable + "äß€\u202e\x00\ud7ff"
        return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(0, 40) if n is None else n))

    def value(self, depth: int = 0) -> Any:
        choice = self.rng.randrange(9 if depth < 4 else 6)
        if choice == 0:
            return None
        if choice == 1:
            return self.rng.choice([True, False])
        if choice == 2:
            return self.rng.choice([0, -1, 2**63, 10**400, 1.5e308, -0.0, NOW])
        if choice == 3:
            return self.text()
        if choice == 4:
            return self.rng.choice(["nan", "inf", "-inf", "1e999", "2026-13-45T99:99:99Z", "2026-03-01T12:00:00"])
        if choice == 5:
            return self.rng.choice(["", " ", "\n", "sc-" + "x" * 80, "SC-UPPER-1", AWS_ID, SP_KEY])
        if choice == 6:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 4))]
        if choice == 7:
            return {self.text(8): self.value(depth + 1) for _ in range(self.rng.randint(0, 4))}
        return self.nested(self.rng.choice([MAX_JSON_DEPTH + 1, 200, 5_000, 30_000]))

    def nested(self, depth: int) -> Any:
        opener = self.rng.choice(["list", "dict"])
        doc: Any = 1
        for _ in range(depth):
            doc = [doc] if opener == "list" else {"a": doc}
        return doc

    def dumps(self, doc: Any) -> bytes:
        try:
            return json.dumps(doc, allow_nan=True).encode()
        except (RecursionError, ValueError):  # json.dumps recurses too: write deep documents by hand
            depth = self.rng.choice([1_000, 20_000])
            return b'{"action": "terminate", "provider": "spa", "x": ' + b"[" * depth + b"]" * depth + b"}"

    def invalid_action(self) -> Any:
        while True:
            value = self.value()
            if value not in VALID_ACTIONS:
                return value

    def request(self) -> tuple[str, bytes, dict[str, str]]:
        kind = self.rng.choice(
            ["noise", "random-json", "mutated-agent", "bad-auth", "eventbridge", "content-type", "oversized"]
        )
        return kind, *getattr(self, kind.replace("-", "_"))()

    def noise(self) -> tuple[bytes, dict[str, str]]:
        body = self.rng.randbytes(self.rng.randint(0, 2_000))
        headers = self.rng.choice([{}, {"Content-Type": "application/json"}, {"X-Scalectl-Signature": "sha256=00"}])
        return body, headers

    def random_json(self) -> tuple[bytes, dict[str, str]]:
        doc = self.value()
        if isinstance(doc, dict) and self.rng.random() < 0.5:
            doc["action"] = self.invalid_action()
        body = self.dumps(doc)
        return body, _signed(body)

    def mutated_agent(self) -> tuple[bytes, dict[str, str]]:
        doc: dict[str, Any] = {"provider": "spa", "key": SP_KEY, "instance_id": SP_ID, "action": "terminate"}
        mutation = self.rng.randrange(9)
        if mutation == 0:
            doc["provider"] = self.rng.choice(["aws-east", "spb", "simulated"])  # another provider account
        elif mutation == 1:
            doc["instance_id"] = self.rng.choice(["dep-2", AWS_ID, "x"])  # another instance than the key's
        elif mutation == 2:
            doc["key"] = self.rng.choice(["SC-UPPER", "sc-" + "y" * 70, "", "-bad", 7, None])
            doc.pop("instance_id") if doc["key"] is None else None
        elif mutation == 3:
            doc["action"] = self.invalid_action()
        elif mutation == 4:
            doc["deadline"] = self.rng.choice(["nan", float("nan"), float("inf"), -5, "2026-03-01T12:00:00", True, {}])
        elif mutation == 5:
            doc["extra"] = self.nested(self.rng.choice([MAX_JSON_DEPTH + 1, 3_000]))
        elif mutation == 6:
            doc = self.rng.choice([[doc], "terminate", 42, None])  # type: ignore[assignment]
        elif mutation == 7:
            doc.pop(self.rng.choice(["provider", "action"]))
        else:
            doc["provider"] = self.rng.choice(["", "p" * 65, 12, ["spa"]])
        body = self.dumps(doc)
        return body, _signed(body)

    def bad_auth(self) -> tuple[bytes, dict[str, str]]:
        body = json.dumps({"provider": "spa", "key": SP_KEY, "action": "terminate"}).encode()
        headers = _signed(body)
        mutation = self.rng.randrange(7)
        if mutation == 0:
            headers["X-Scalectl-Signature"] = sign(
                Secret("another-secret-0123456789"), headers["X-Scalectl-Timestamp"], body
            )
        elif mutation == 1:
            stale = NOW + self.rng.choice([-1, 1]) * self.rng.randint(301, 10**9)
            headers = {**_signed(body, stale)}
        elif mutation == 2:
            headers["X-Scalectl-Timestamp"] = self.rng.choice(["nan", "inf", "1e400", "", "abc", "9" * 400, "-0"])
        elif mutation == 3:
            headers["X-Scalectl-Signature"] = self.rng.choice(["", "sha256=", "md5=abc", "sha256=" + "z" * 64])
        elif mutation == 4:
            headers["X-Scalectl-Signature"] = "sha256=" + self.text(64).encode("latin-1", "ignore").hex()[:64]
        elif mutation == 5:
            del headers["X-Scalectl-Timestamp"]
        else:
            body = body.replace(b"terminate", b"stop")  # signed a different body
        return body, headers

    def eventbridge(self) -> tuple[bytes, dict[str, str]]:
        mutation = self.rng.randrange(7)
        token = TOKEN
        if mutation == 0:
            doc = _event()
            token = self.rng.choice(["", "x" * 30, TOKEN[:-1], TOKEN + " x"])
        elif mutation == 1:
            doc = {"provider": "aws-east", "instance_id": AWS_ID, "action": "terminate"}  # agents must sign
        elif mutation == 2:
            doc = _event(time=self.rng.choice(["2025-01-01T00:00:00Z", "2030-01-01T00:00:00Z", "garbage", 5]))
        elif mutation == 3:
            doc = _event(detail={"instance-id": self.rng.choice(["i-xyz", "", 5, AWS_ID.upper()])})
        elif mutation == 4:
            doc = _event(**{"detail-type": self.text(20), "source": self.rng.choice(["aws.ec2", "aws.health", 3])})
        elif mutation == 5:
            doc = _event(detail=self.nested(self.rng.choice([MAX_JSON_DEPTH + 1, 9_000])))
        else:
            doc = _event(detail={"instance-id": AWS_ID, "instance-action": self.invalid_action()})
        body = self.dumps(doc)
        return body, {"Content-Type": "application/json", "X-Scalectl-EventBridge-Token": token}

    def content_type(self) -> tuple[bytes, dict[str, str]]:
        body = json.dumps({"provider": "spa", "key": SP_KEY, "action": "terminate"}).encode()
        return body, {**_signed(body), "Content-Type": self.rng.choice(["text/plain", "application/xml", "x"])}

    def oversized(self) -> tuple[bytes, dict[str, str]]:
        body = b'{"provider": "spa", "key": "' + b"a" * (MAX_BODY_BYTES + self.rng.randint(0, 5_000)) + b'"}'
        return body, self.rng.choice([_signed(body), {"X-Scalectl-EventBridge-Token": TOKEN}, {}])


@pytest.fixture
def store(sqlite_engine: Engine) -> Iterator[Store]:
    migrate.upgrade(sqlite_engine)
    store = Store(sqlite_engine)
    store.config.apply(parse_config(TIERS, "t.yaml"), TIERS, "t.yaml", 1.0)
    with store.sessions.begin() as s:
        s.add_all([ready_instance_row(SP_KEY, "spa", SP_ID), ready_instance_row(AWS_KEY, "aws-east", AWS_ID)])
    yield store


async def test_ten_thousand_fuzzed_requests_get_no_5xx_and_change_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUZZ_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("SCALECTL_EVENTBRIDGE_TOKEN", TOKEN)
    clock = FakeClock(NOW)
    providers = {"spa": SimpleNamespace(type="spheron"), "aws-east": SimpleNamespace(type="aws")}
    daemon = SimpleNamespace(
        settings=SimpleNamespace(webhook_secret_env="FUZZ_WEBHOOK_SECRET", webhook_secret_file=None),
        clock=clock,
        controller=SimpleNamespace(fleet=SimpleNamespace(providers=providers), store=store),
    )
    app = build_http_app(Health(5.0, clock), DaemonMetrics(), lambda: {}, webhook=make_handler(daemon))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://scalectl.invalid") as client:
        # One notice accepted before the fuzz: its replays are part of the fuzz and must be refused.
        accepted_body = json.dumps({"provider": "spa", "key": SP_KEY, "action": "rebalance"}).encode()
        accepted_headers = _signed(accepted_body)
        first = await client.post(URL, content=accepted_body, headers=accepted_headers)
        assert first.status_code == 202
        before = _fingerprint(store)

        fuzz = Fuzz(seed=20261123)
        statuses: Counter[int] = Counter()
        by_kind: Counter[str] = Counter()
        for i in range(REQUESTS):
            if i % 50 == 0:
                kind, body, headers = "replay", accepted_body, accepted_headers
            else:
                kind, body, headers = fuzz.request()
            reply = await client.post(URL, content=body, headers=headers)
            statuses[reply.status_code] += 1
            by_kind[kind] += 1
            assert 400 <= reply.status_code < 500, (kind, reply.status_code, body[:200], headers, reply.text)
        assert sum(statuses.values()) >= 10_000 and not [s for s in statuses if s >= 500]
        assert _fingerprint(store) == before, "an invalid request changed the store"
        assert statuses[409] == by_kind["replay"] and len(by_kind) == 8
        print(f"\nwebhook fuzz: {sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}")

        # The same store and app do change for a valid notice: the fingerprint above could have failed.
        body = json.dumps({"provider": "spa", "key": SP_KEY, "instance_id": SP_ID, "action": "terminate"}).encode()
        assert (await client.post(URL, content=body, headers=_signed(body))).status_code == 202
        assert _fingerprint(store) != before
