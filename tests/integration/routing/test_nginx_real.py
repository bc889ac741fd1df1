"""A real nginx (Debian's package, `apt-get install nginx-light`) as its own instance in a temp prefix, in
front of three in-process vLLM stand-ins: spread, session affinity, reload removing a backend, empty tier."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalectl.serving.routing import Endpoint, NginxTarget, TierRoute
from tests.ports import free_port
from tests.private_nginx import NGINX, private_nginx

pytestmark = pytest.mark.integration


def _backend(name: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            body = json.dumps({"backend": name, "object": "list", "data": [{"id": "m"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = _answer
        do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def backends() -> Iterator[dict[str, str]]:
    servers = {name: _backend(name) for name in ("a", "b", "c")}
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers.values()]
    for t in threads:
        t.start()
    try:
        yield {name: f"127.0.0.1:{s.server_address[1]}" for name, s in servers.items()}
    finally:
        for s in servers.values():
            s.shutdown()
            s.server_close()


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[tuple[NginxTarget, Path]]:
    with private_nginx(tmp_path, worker_connections=256, start_polls=100) as server:
        yield NginxTarget(server.conf_d, nginx_bin=NGINX, main_conf=server.main, prefix=tmp_path), tmp_path


def _wait_for(url: str, predicate, attempts: int = 100, **kwargs: Any) -> httpx.Response:
    """Poll until the new config is live (reload hands over to new workers gracefully); bounded."""
    last: httpx.Response | None = None
    for _ in range(attempts):
        try:
            last = httpx.get(url, timeout=2, **kwargs)
            if predicate(last):
                return last
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} never matched; last: {last.status_code if last else None}")


# A connection per request: a kept-alive one may have been accepted by a worker that a reload is retiring,
# which closes it once idle; under load that raced the next request ("Server disconnected") in CI.
FRESH = httpx.Limits(max_keepalive_connections=0)


def _status(url: str) -> int:
    with httpx.Client(timeout=5, limits=FRESH) as client:
        return client.post(url, json={}).status_code


def _hits(url: str, n: int, headers: dict[str, str] | None = None) -> Counter[str]:
    with httpx.Client(timeout=5, limits=FRESH) as client:
        return Counter(client.post(url, headers=headers or {}, json={}).json()["backend"] for _ in range(n))


async def test_spread_affinity_reload_and_empty(nginx, backends) -> None:
    target, _ = nginx
    batch_port, chat_port = free_port(), free_port()
    batch = TierRoute("batch", listen=f"127.0.0.1:{batch_port}")
    chat = TierRoute("chat", session_affinity=True, listen=f"127.0.0.1:{chat_port}")
    all_three = [Endpoint(a) for a in backends.values()]

    await target.apply(batch, all_three)
    await target.apply(chat, all_three)
    batch_url, chat_url = f"http://127.0.0.1:{batch_port}/v1/chat/completions", f"http://127.0.0.1:{chat_port}/"
    _wait_for(batch_url, lambda r: r.status_code == 200)
    _wait_for(chat_url, lambda r: r.status_code == 200)

    # Stateless: requests spread over all three backends.
    spread = _hits(batch_url, 30)
    assert set(spread) == {"a", "b", "c"}, spread

    # Affinity: one session always lands on one backend; many sessions use more than one.
    for session in ("s-1", "s-2", "s-3"):
        assert len(_hits(chat_url, 10, {"X-Session-Id": session})) == 1
    owners = {next(iter(_hits(chat_url, 1, {"X-Session-Id": f"user-{i}"}))) for i in range(30)}
    assert len(owners) > 1

    # Unchanged endpoints: no write, no reload.
    same = await target.apply(batch, list(reversed(all_three)))
    assert (same.changed, same.reloaded) == (False, False)

    # Reload removing a backend: once the new workers serve, "c" never answers again.
    await target.apply(batch, [Endpoint(backends["a"]), Endpoint(backends["b"])])
    _wait_for(batch_url, lambda r: r.status_code == 200 and "127.0.0.1" in r.headers.get("X-Scalectl-Upstream", ""))
    for _ in range(100):  # bounded: old workers finish their keepalive connections
        try:
            if "c" not in _hits(batch_url, 10):
                break
        except httpx.TransportError:  # an old worker closed its keepalive connection during the reload
            pass
        time.sleep(0.05)
    after = _hits(batch_url, 30)
    assert set(after) == {"a", "b"}, after

    # Affinity survives removing another backend for sessions that were not on it.
    owner = next(iter(_hits(chat_url, 1, {"X-Session-Id": "keep-me"})))
    removed = next(name for name in backends if name != owner)
    survivors = [Endpoint(addr) for name, addr in backends.items() if name != removed]
    await target.apply(chat, survivors)
    for _ in range(100):  # bounded: wait until the removed backend is gone from the chat tier
        try:
            if removed not in _hits(chat_url, 5, {"X-Session-Id": f"probe-{_}"}):
                break
        except httpx.TransportError:  # an old worker closed its keepalive connection during the reload
            pass
        time.sleep(0.05)
    assert next(iter(_hits(chat_url, 1, {"X-Session-Id": "keep-me"}))) == owner

    # Empty tier: valid config, 503 with a reason.
    await target.apply(batch, [])
    empty = _wait_for(batch_url, lambda r: r.status_code == 503)
    assert "no ready instances for tier batch" in empty.text
    assert empty.headers.get("Retry-After") == "30"

    # And back. Until the old workers (still serving the empty tier's 503) finish, a request may reach one.
    await target.apply(batch, [Endpoint(backends["b"])])
    _wait_for(batch_url, lambda r: r.status_code == 200)
    for _ in range(100):  # bounded
        if all(_status(batch_url) == 200 for _ in range(10)):
            break
        time.sleep(0.05)
    assert set(_hits(batch_url, 10)) == {"b"}


async def test_weights_split_requests_by_capacity(nginx, backends) -> None:
    """A tier with variants: each server's weight is its capacity. Requests one after another (no connection
    open) go by weighted round robin under least_conn: an instance of weight 10 takes ten for every three the
    weight-3 one takes."""
    target, _ = nginx
    port = free_port()
    route = TierRoute("mixed", listen=f"127.0.0.1:{port}")
    await target.apply(route, [Endpoint(backends["a"], weight=10), Endpoint(backends["b"], weight=3)])
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    _wait_for(url, lambda r: r.status_code == 200)
    hits = _hits(url, 130)
    assert set(hits) == {"a", "b"}, hits
    assert 2.5 <= hits["a"] / hits["b"] <= 4.0, hits
