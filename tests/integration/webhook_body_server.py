"""The daemon's webhook endpoint alone under uvicorn, for measuring a process's memory under huge bodies.

Run as ``python -m tests.integration.webhook_body_server <port-file>``: serves on a free loopback port,
writes the port to the file once listening. Notices are accepted into memory (nothing to mark).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import uvicorn

from scalectl.clocks import SystemClock
from scalectl.controller.http_app import Health, build_http_app
from scalectl.controller.metrics import DaemonMetrics
from scalectl.controller.webhooks.auth import WebhookAuth
from scalectl.controller.webhooks.http import make_notice_endpoint
from scalectl.controller.webhooks.notice import InterruptionNotice
from scalectl.providers.secrets import Secret


class _MemoryReplays:
    def __init__(self) -> None:
        self.seen: set[str] = set()

    async def claim(self, digest: str, now: float) -> bool:
        if digest in self.seen:
            return False
        self.seen.add(digest)
        return True

    async def release(self, digest: str) -> None:
        self.seen.discard(digest)


async def _sink(notice: InterruptionNotice, now: float) -> str | None:
    return None


def main(port_file: str) -> None:
    clock = SystemClock()
    auth = WebhookAuth(hmac_secret=Secret("body-limit-secret-0123456789abcdef"))
    endpoint = make_notice_endpoint(auth, clock, _sink, replays=_MemoryReplays())
    app = build_http_app(Health(5.0, clock), DaemonMetrics(), lambda: {}, webhook=endpoint)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    Path(port_file).write_text(str(sock.getsockname()[1]))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1])
