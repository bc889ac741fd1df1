"""An unauthenticated 1 GiB chunked body against the webhook, served by uvicorn in its own process: the
server's peak memory may grow by less than 64 MiB (before the stream limit it held the whole body)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

GIB = 1 << 30
MIB = 1 << 20
CHUNK = b"{" + b" " * (MIB - 1)  # looks like the start of a JSON document, then whitespace


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, str]]:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.webhook_body_server", str(port_file)],
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        url = ""
        for _ in range(300):  # up to ~30 s for the interpreter to start and bind
            if port_file.exists() and port_file.read_text():
                url = f"http://127.0.0.1:{port_file.read_text()}"
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
            assert proc.poll() is None, "the webhook server exited"
            time.sleep(0.1)
        else:
            raise AssertionError("the webhook server did not start")
        yield proc.pid, url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _reset_peak(pid: int) -> None:
    # Linux >= 4.0: "5" resets the peak RSS (VmHWM) to the current RSS. Without it VmHWM also holds the
    # start-up peak: the bound only gets stricter.
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


@pytest.mark.parametrize("signed", [False, True])
def test_a_1_gib_chunked_body_is_refused_with_bounded_server_memory(server: tuple[int, str], signed: bool) -> None:
    pid, url = server
    httpx.post(f"{url}/v1/webhooks/interruption", content=b"{}", timeout=10)  # warm the code path up
    _reset_peak(pid)
    before = _kib(pid, "VmRSS")
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(GIB // MIB):
            sent += len(CHUNK)
            yield CHUNK

    headers = {"X-Scalectl-Signature": "sha256=" + "0" * 64, "X-Scalectl-Timestamp": "1"} if signed else {}
    status: int | str
    try:
        status = httpx.post(f"{url}/v1/webhooks/interruption", content=body(), headers=headers, timeout=120).status_code
    except httpx.TransportError as exc:  # the server may close the connection on the rest of the body
        status = type(exc).__name__
    growth = (_kib(pid, "VmHWM") - before) * 1024
    print(
        f"\n1 GiB chunked body ({'signed' if signed else 'unsigned'}): answer {status}, "
        f"{sent / MIB:.0f} MiB offered, server peak RSS growth {growth / MIB:.1f} MiB"
    )
    assert status in (413, "RemoteProtocolError", "WriteError", "ReadError")
    assert growth < 64 * MIB
    assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200  # and it still serves
