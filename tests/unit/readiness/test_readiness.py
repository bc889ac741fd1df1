"""ReadinessProbe against a local HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from scalectl.clocks import FakeClock
from scalectl.serving.readiness import ReadinessProbe
from tests.ports import free_port


class _State:
    health = 200
    models: Any = {"object": "list", "data": [{"id": "m/llama", "object": "model", "max_model_len": 4096}]}


def _handler(state: type[_State]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self.send_response(state.health)
                self.end_headers()
                return
            body = json.dumps(state.models).encode() if not isinstance(state.models, bytes) else state.models
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, type[_State]]]:
    state = type("S", (_State,), {})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}", state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
async def probe():
    p = ReadinessProbe(FakeClock(1000.0))
    yield p
    await p.aclose()


async def test_ready_when_health_and_model_match(server, probe) -> None:
    address, _ = server
    result = await probe.check(address, "m/llama", 4096)
    assert result.ready, result.reason
    assert (result.checked_at, result.max_model_len, result.models) == (1000.0, 4096, ("m/llama",))


async def test_unhealthy(server, probe) -> None:
    address, state = server
    state.health = 503
    result = await probe.check(address, "m/llama", 4096)
    assert not result.ready and result.reason == "GET /health returned 503"


async def test_model_not_listed(server, probe) -> None:
    address, _ = server
    result = await probe.check(address, "other/model", 4096)
    assert not result.ready and result.reason == "model other/model not listed; got ['m/llama']"


async def test_wrong_max_model_len(server, probe) -> None:
    address, state = server
    state.models = {"data": [{"id": "m/llama", "max_model_len": 8192}]}
    result = await probe.check(address, "m/llama", 4096)
    assert not result.ready and result.reason == "max_model_len 8192 != expected 4096"


async def test_served_name_matches_on_root(server, probe) -> None:
    address, state = server
    state.models = {"data": [{"id": "chat", "root": "m/llama", "max_model_len": 4096}]}
    assert (await probe.check(address, "m/llama", 4096)).ready


async def test_garbage_model_list(server, probe) -> None:
    address, state = server
    state.models = b"<html>loading</html>"
    result = await probe.check(address, "m/llama")
    assert not result.ready and "model list" in result.reason


async def test_connection_refused(probe) -> None:
    result = await probe.check(f"127.0.0.1:{free_port()}", "m/llama", 4096)  # this worker's own: nobody listens
    assert not result.ready and result.reason == "connection refused"
