"""A Redis broker that dies and comes back: its tiers' queue depth is unknown while it is away, known again
within two ticks of its return, and the daemon's log says so once each way (not once per tick).

Measured before: the new depth was used only 36-58 s after Redis answered again (the source rested up to
60 s after repeated failures) and nothing was logged about losing or regaining it. The broker is a private
redis-server (a free port, no persistence) so that stopping it touches nobody else's."""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scalectl.clocks import FakeClock
from scalectl.sources.reader import SignalReader
from scalectl.sources.spec import SignalsSpec
from tests.ports import free_port

pytestmark = pytest.mark.integration
TICK = 5.0  # the daemon's default tick interval


class PrivateRedis:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is needed (Debian's redis-server package)"
        self.binary = binary
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="scalectl-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen([self.binary, *args, "--dir", str(self.dir)], stdout=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                if client.ping():
                    return
            time.sleep(0.05)
        pytest.fail("the private redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


async def test_depth_is_read_again_within_two_ticks_and_logged_once_each_way(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scalectl.sources")
    clock = FakeClock()
    raw = redis.Redis.from_url(private_redis.url)
    raw.rpush("jobs", *range(7))
    spec = SignalsSpec.model_validate({"queue": {"broker_url": private_redis.url, "queues": ["jobs"]}})
    reader = SignalReader(clock, timeout=1.0)  # the daemon's rest is two ticks; this is the reader's default
    try:
        assert (await reader.read("batch", spec, [])).signals.queue_depth == 7
        private_redis.stop()
        for _ in range(12):  # a minute of ticks with the broker away: unknown, never zero
            clock.advance(TICK)
            assert (await reader.read("batch", spec, [])).signals.queue_depth is None
        private_redis.start()
        redis.Redis.from_url(private_redis.url).rpush("jobs", *range(4))
        depths = []
        for _ in range(2):  # within two ticks of its return
            clock.advance(TICK)
            depths.append((await reader.read("batch", spec, [])).signals.queue_depth)
        assert depths[-1] == 4, f"depth per tick after the broker came back: {depths}"
        for _ in range(3):
            clock.advance(TICK)
            await reader.read("batch", spec, [])
    finally:
        await reader.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name == "scalectl.sources"]
    lost = [line for line in lines if " lost: " in line]
    back = [line for line in lines if "answers again" in line]
    assert len(lost) == 1 and len(back) == 1, lines
    assert f"127.0.0.1:{private_redis.port}" in lost[0]
