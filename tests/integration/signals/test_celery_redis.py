"""Queue depth and in-flight counts from a real Redis broker, with a real Celery worker holding tasks."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from scalectl.clocks import SystemClock
from scalectl.sources.reader import SignalReader
from scalectl.sources.spec import SignalsSpec
from tests.integration.signals.worker import celery_worker

pytestmark = pytest.mark.integration

PRIORITIES = [0, 3, 6, 9, 9, 6, 3, 0, 5, 1]  # kombu maps 5 → step 3 and 1 → step 0


def _poll(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {seconds}s waiting for {what}")


@pytest.fixture
def isolated(redis_url: str, unique: str) -> Iterator[tuple[str, str]]:
    prefix = f"{unique}:"
    yield redis_url, prefix
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"{prefix}*", count=500):
        client.delete(key)
    client.delete(f"{unique}-release")


def _app(broker: str, prefix: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SIGTEST_BROKER", broker)  # for the worker, which loads celery_app from its environment
    monkeypatch.setenv("SIGTEST_PREFIX", prefix)
    from tests.integration.signals.celery_app import make_app

    return make_app(broker, prefix)


async def test_depth_and_in_flight_with_priorities_and_a_worker(
    isolated: tuple[str, str], unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, prefix = isolated
    busy, idle = f"{unique}-busy", f"{unique}-idle"
    flag = f"{unique}-release"
    app = _app(broker, prefix, monkeypatch)
    raw = redis.Redis.from_url(broker)
    spec = SignalsSpec.model_validate(
        {"queue": {"broker_url": broker, "queues": [busy, idle], "transport_options": {"global_keyprefix": prefix}}}
    )
    reader = SignalReader(SystemClock())
    try:
        for priority in PRIORITIES:
            app.send_task("sigtest.hold", args=[flag], queue=busy, priority=priority)
        for priority in (0, 3, 6, 9, 9):
            app.send_task("sigtest.hold", args=[flag], queue=idle, priority=priority)

        # Before any worker: everything pending, spread over the priority lists.
        sub_lists = [f"{prefix}{busy}", *(f"{prefix}{busy}\x06\x16{step}" for step in (3, 6, 9))]
        assert [raw.llen(k) for k in sub_lists] == [3, 3, 2, 2]
        reading = await reader.read("batch", spec, [])
        assert reading.errors == {}
        assert reading.signals.queue_depth == 15
        assert reading.signals.in_flight == 0

        with celery_worker(broker=broker, prefix=prefix, control=broker, queues=[busy], concurrency=2):
            _poll(lambda: raw.hlen(f"{prefix}unacked") == 2, 60, "the worker to hold 2 tasks")
            time.sleep(0.5)  # nothing more may arrive: prefetch is concurrency × 1
            reading = await reader.read("batch", spec, [])
            assert reading.errors == {}
            assert reading.signals.queue_depth == 8 + 5
            assert reading.signals.in_flight == 2
            per_queue = reader.details("batch")["queues"]
            assert per_queue[busy] == {"pending": 8, "in_flight": 2}
            assert per_queue[idle] == {"pending": 5, "in_flight": 0}
            assert "celery redis://127.0.0.1:6379/11" in reading.sources["queue_depth"]

            raw.set(flag, "1")
            _poll(lambda: raw.hlen(f"{prefix}unacked") == 0 and raw.llen(f"{prefix}{busy}") == 0, 60, "the drain")
            _poll(lambda: all(raw.llen(k) == 0 for k in sub_lists), 60, "the priority lists to drain")
            reading = await reader.read("batch", spec, [])
            assert reading.signals.queue_depth == 5
            assert reading.signals.in_flight == 0
    finally:
        await reader.aclose()


async def test_db_number_is_respected(isolated: tuple[str, str], unique: str) -> None:
    broker, prefix = isolated
    queue = f"{unique}-q"
    raw = redis.Redis.from_url(broker)
    raw.lpush(f"{prefix}{queue}", "m1", "m2")
    other_db = broker.rsplit("/", 1)[0] + "/12"
    reader = SignalReader(SystemClock())
    options = {"global_keyprefix": prefix}
    try:
        right = await reader.read(
            "t",
            SignalsSpec.model_validate(
                {"queue": {"broker_url": broker, "queues": [queue], "transport_options": options}}
            ),
            [],
        )
        wrong = await reader.read(
            "u",
            SignalsSpec.model_validate(
                {"queue": {"broker_url": other_db, "queues": [queue], "transport_options": options}}
            ),
            [],
        )
    finally:
        await reader.aclose()
    assert right.signals.queue_depth == 2
    assert wrong.signals.queue_depth is None  # db 12 has no such queue: an error, not 0
    assert "not found" in wrong.errors["queue"]


async def test_missing_queue_wrong_password_and_dead_broker(redis_url: str, unique: str) -> None:
    reader = SignalReader(SystemClock())
    secret = "s3cr3t-pw"
    try:
        missing = await reader.read(
            "a", SignalsSpec.model_validate({"queue": {"broker_url": redis_url, "queues": [f"{unique}-nope"]}}), []
        )
        bad_auth = await reader.read(
            "b",
            SignalsSpec.model_validate(
                {"queue": {"broker_url": f"redis://:{secret}@127.0.0.1:6379/11", "queues": ["celery"]}}
            ),
            [],
        )
        dead = await reader.read(
            "c", SignalsSpec.model_validate({"queue": {"broker_url": f"redis://:{secret}@127.0.0.1:1/11"}}), []
        )
    finally:
        await reader.aclose()
    assert missing.signals.queue_depth is None and missing.signals.in_flight is None
    assert f"{unique}-nope" in missing.errors["queue"] and "not found" in missing.errors["queue"]
    for reading in (bad_auth, dead):
        assert reading.signals.queue_depth is None
        assert secret not in reading.errors["queue"]
        assert "redis://:***@127.0.0.1" in reading.errors["queue"]
    assert reader.error_counts("c") == {"queue": 1}
