"""The daemon speaks systemd's notify protocol: READY after the first tick, WATCHDOG while healthy,
STOPPING on SIGTERM. The test plays systemd with a datagram socket of its own."""

from __future__ import annotations

import contextlib
import signal
import socket
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import start_daemon

pytestmark = pytest.mark.e2e


def test_ready_watchdog_and_stopping_reach_the_notify_socket(tmp_path: Path) -> None:
    sock_dir = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))  # AF_UNIX paths must stay short
    path = sock_dir / "notify"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    server.settimeout(0.5)
    daemon = start_daemon(tmp_path, "--port", "0", "--speed", "10", NOTIFY_SOCKET=str(path), WATCHDOG_USEC="2000000")
    messages: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            any("READY=1" in m for m in messages) and sum("WATCHDOG=1" in m for m in messages) >= 2
        ):
            with contextlib.suppress(TimeoutError):
                messages.append(server.recv(4096).decode())
        daemon.send_signal(signal.SIGTERM)
        end = time.monotonic() + 30
        while time.monotonic() < end and not any("STOPPING=1" in m for m in messages):
            with contextlib.suppress(TimeoutError):
                messages.append(server.recv(4096).decode())
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
        server.close()
        path.unlink(missing_ok=True)
        sock_dir.rmdir()
    ready = next(i for i, m in enumerate(messages) if "READY=1" in m)
    assert "STATUS=reconciling 3 tiers" in messages[ready]
    assert sum("WATCHDOG=1" in m for m in messages) >= 2
    assert any("STOPPING=1" in m for m in messages[ready:])
