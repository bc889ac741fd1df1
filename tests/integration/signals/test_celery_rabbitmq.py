"""Ready and unacknowledged counts from a real RabbitMQ with a real Celery worker holding tasks."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from scalectl.clocks import SystemClock
from scalectl.sources.reader import SignalReader
from scalectl.sources.spec import SignalsSpec
from tests.integration.signals.worker import celery_worker

pytestmark = pytest.mark.integration


async def _poll_reading(reader: SignalReader, spec: SignalsSpec, want: tuple[float, float | None], seconds: float):
    """The management API refreshes queue statistics every ~5 s: wait (bounded) for the figures to settle."""
    deadline = time.monotonic() + seconds
    reading = None
    while time.monotonic() < deadline:
        reading = await reader.read("batch", spec, [])
        if (reading.signals.queue_depth, reading.signals.in_flight) == want:
            return reading
        time.sleep(0.5)
    pytest.fail(f"figures never became {want}; last reading: {reading}")


@pytest.fixture
def queues(rabbit_url: str, rabbit_management: str, unique: str) -> Iterator[tuple[str, str]]:
    busy, idle = f"{unique}-busy", f"{unique}-idle"
    yield busy, idle
    for kind, name in (("queues", busy), ("queues", idle), ("exchanges", busy), ("exchanges", idle)):
        httpx.delete(f"{rabbit_management}/api/{kind}/%2F/{name}", auth=("guest", "guest"), timeout=5)


def _app(broker: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SIGTEST_BROKER", broker)  # for the worker, which loads celery_app from its environment
    monkeypatch.setenv("SIGTEST_PREFIX", "")
    from tests.integration.signals.celery_app import make_app

    return make_app(broker, "")


async def test_ready_and_unacked_with_a_worker(
    rabbit_url: str,
    rabbit_management: str,
    redis_url: str,
    queues: tuple[str, str],
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy, idle = queues
    flag = f"{unique}-release"
    control = redis.Redis.from_url(redis_url)
    app = _app(rabbit_url, monkeypatch)
    managed = SignalsSpec.model_validate(
        {"queue": {"broker_url": rabbit_url, "queues": [busy, idle], "management_url": rabbit_management}}
    )
    amqp_only = SignalsSpec.model_validate({"queue": {"broker_url": rabbit_url, "queues": [busy, idle]}})
    reader = SignalReader(SystemClock())
    try:
        for priority in (0, 3, 6, 9, 9, 6, 3, 0, 5, 1):
            app.send_task("sigtest.hold", args=[flag], queue=busy, priority=priority)
        for priority in (0, 9, 5):
            app.send_task("sigtest.hold", args=[flag], queue=idle, priority=priority)
        await _poll_reading(reader, managed, (13, 0), 30)

        with celery_worker(broker=rabbit_url, prefix=unique, control=redis_url, queues=[busy], concurrency=2):
            reading = await _poll_reading(reader, managed, (8 + 3, 2), 60)
            assert reading.errors == {}
            assert reader.details("batch")["queues"][busy] == {"pending": 8, "in_flight": 2}

            # AMQP alone: ready counts are exact at once; in-flight is unknown, and says so.
            plain = await reader.read("plain", amqp_only, [])
            assert plain.signals.queue_depth == 11
            assert plain.signals.in_flight is None
            assert "management_url" in plain.errors["queue"]

            control.set(flag, "1")
            await _poll_reading(reader, managed, (3, 0), 60)
    finally:
        control.delete(flag)
        await reader.aclose()


async def test_missing_queue_and_wrong_password(rabbit_url: str, rabbit_management: str, unique: str) -> None:
    secret = "wr0ng-pass"
    bad_url = f"amqp://guest:{secret}@127.0.0.1:5672//"
    reader = SignalReader(SystemClock())
    try:
        missing_mgmt = await reader.read(
            "a",
            SignalsSpec.model_validate(
                {"queue": {"broker_url": rabbit_url, "queues": [f"{unique}-x"], "management_url": rabbit_management}}
            ),
            [],
        )
        missing_amqp = await reader.read(
            "b", SignalsSpec.model_validate({"queue": {"broker_url": rabbit_url, "queues": [f"{unique}-x"]}}), []
        )
        bad_amqp = await reader.read("c", SignalsSpec.model_validate({"queue": {"broker_url": bad_url}}), [])
        bad_mgmt = await reader.read(
            "d",
            SignalsSpec.model_validate({"queue": {"broker_url": bad_url, "management_url": rabbit_management}}),
            [],
        )
    finally:
        await reader.aclose()
    for reading in (missing_mgmt, missing_amqp):
        assert reading.signals.queue_depth is None
        assert f"{unique}-x" in reading.errors["queue"] and "does not exist" in reading.errors["queue"]
    for reading in (bad_amqp, bad_mgmt):
        assert reading.signals.queue_depth is None
        assert "authentication failed" in reading.errors["queue"]
        assert secret not in reading.errors["queue"]
