"""One simulated cloud on the real clock, served over HTTP so several daemon processes can share it
(``type: simulated-remote``; the adapter is ``scalectl.providers.simulated.remote``).

    python -m providers.simulated.server --host 127.0.0.1 --port 0 --seed 7 \\
        --provision-delay-min 5 --provision-delay-max 20

prints ``listening on http://127.0.0.1:PORT`` once it accepts connections (read it to learn the port that
``--port 0`` picked) and serves until SIGTERM or SIGINT. ``--state-path FILE`` keeps the cloud in a JSON
file, so instances outlive a restart of the server as they outlive a daemon.

The API (JSON; the wire format is in ``remote.py``): ``POST /offers`` (a GPU request) -> offers;
``POST /instances`` (a launch; idempotent by key) -> the instance; ``GET /instances?prefix=`` -> our
instances whose key starts with the prefix; ``GET /instances/{id}``; ``DELETE /instances/{id}`` -> 204
(also when already gone). A cloud error answers ``{"error": kind, "message": text}`` with the kind's
status (404 not found, 409 no capacity, 400 invalid request, ...). No credentials: bind it to loopback
or a trusted network.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import SystemClock
from scalectl.providers.errors import ProviderError
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated.cloud import SimulatedCloud
from scalectl.providers.simulated.remote import (
    error_kind,
    error_message,
    instance_to_json,
    launch_from_json,
    offer_to_json,
    request_from_json,
)

Handler = Callable[[Request], Awaitable[Response]]
KEEP_ALIVE = 65  # seconds an idle client connection is kept open


def _error(kind: str, status: int, message: str, retry_after: float | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": kind, "message": message}
    headers = {}
    if retry_after is not None:
        body["retry_after"] = retry_after
        headers["Retry-After"] = str(max(0, round(retry_after)))
    return JSONResponse(body, status_code=status, headers=headers)


def _answering(handler: Handler) -> Handler:
    """Cloud errors and unreadable requests become the JSON error answers the adapter maps back."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except ProviderError as exc:
            kind, status = error_kind(exc)
            return _error(kind, status, error_message(exc), exc.retry_after)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a missing or malformed field
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            return _error("invalid-request", 400, f"{request.method} {request.url.path}: {detail}")

    return wrapped


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except ValueError:
        raise ValueError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


def build_app(cloud: SimulatedCloud) -> Starlette:
    """The HTTP API over ``cloud``. Requests are served one event loop, so the cloud needs no lock."""

    async def offers(request: Request) -> Response:
        found = await cloud.offers(request_from_json(await _body(request)))
        return JSONResponse([offer_to_json(o) for o in found])

    async def create(request: Request) -> Response:
        spec = launch_from_json(await _body(request), cloud.name)
        return JSONResponse(instance_to_json(await cloud.create(spec)))

    async def get(request: Request) -> Response:
        return JSONResponse(instance_to_json(await cloud.get(request.path_params["provider_id"])))

    async def listing(request: Request) -> Response:
        found = await cloud.list(request.query_params.get("prefix", ""))
        return JSONResponse([instance_to_json(i) for i in found])

    async def delete(request: Request) -> Response:
        await cloud.delete(request.path_params["provider_id"])
        return Response(status_code=204)

    async def stop(request: Request) -> Response:
        await cloud.stop(request.path_params["provider_id"])
        return Response(status_code=204)

    async def start(request: Request) -> Response:
        await cloud.start(request.path_params["provider_id"])
        return Response(status_code=204)

    return Starlette(
        routes=[
            Route("/offers", _answering(offers), methods=["POST"]),
            Route("/instances", _answering(create), methods=["POST"]),
            Route("/instances", _answering(listing), methods=["GET"]),
            Route("/instances/{provider_id}", _answering(get), methods=["GET"]),
            Route("/instances/{provider_id}", _answering(delete), methods=["DELETE"]),
            Route("/instances/{provider_id}/stop", _answering(stop), methods=["POST"]),
            Route("/instances/{provider_id}/start", _answering(start), methods=["POST"]),
        ]
    )


def make_cloud(**options: Any) -> SimulatedCloud:
    """A simulated cloud on the real clock; ``options`` are ``SimOptions`` fields."""
    return SimulatedCloud(ProviderConfig(name="simulated", type="simulated", options=options), SystemClock())


# ---- the process ---------------------------------------------------------------------------------------


class _AnnouncingServer(uvicorn.Server):
    """Prints the URL once the socket accepts connections: a parent waits for that line."""

    def __init__(self, config: uvicorn.Config, url: str):
        super().__init__(config)
        self.url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.should_exit:
            print(f"listening on {self.url}", flush=True)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets whose proto says TCP.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m providers.simulated.server",
        description="Serve one simulated cloud over HTTP for several daemons (provider type simulated-remote).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8300, help="0 picks a free port (printed once listening)")
    parser.add_argument("--log-level", default="warning")
    # SimOptions fields; those not given keep the simulated cloud's defaults.
    parser.add_argument("--seed", type=int)
    parser.add_argument("--regions", type=lambda text: tuple(r for r in text.split(",") if r), help="a,b,...")
    parser.add_argument("--provision-delay-min", type=float, help="seconds from create to running (default 120)")
    parser.add_argument("--provision-delay-max", type=float, help="(default 300)")
    parser.add_argument("--capacity-per-offer", type=int, help="machines per GPU, region and capacity kind")
    parser.add_argument("--spot-interruptions-per-hour", type=float)
    parser.add_argument("--interruption-notice", type=float)
    parser.add_argument("--create-delay", type=float, help="seconds a create takes to answer")
    parser.add_argument("--state-path", help="keep the cloud in this JSON file (survives a restart)")
    return parser.parse_args(argv)


SIM_OPTIONS = (
    "seed",
    "regions",
    "provision_delay_min",
    "provision_delay_max",
    "capacity_per_offer",
    "spot_interruptions_per_hour",
    "interruption_notice",
    "create_delay",
    "state_path",
)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    options = {name: getattr(args, name) for name in SIM_OPTIONS if getattr(args, name) is not None}
    cloud = make_cloud(**options)
    try:
        sock = _listen(args.host, args.port)
    except OSError as exc:
        print(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return 1
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    config = uvicorn.Config(
        build_app(cloud),
        log_level=args.log_level,
        lifespan="off",
        access_log=False,
        # Longer than a client's idle connections live (httpx: 5 s), so the client always closes first: with
        # equal timeouts a daemon ticking every 5 s reuses a connection just as the server drops it.
        timeout_keep_alive=KEEP_ALIVE,
    )
    server = _AnnouncingServer(config, f"http://{host}:{port}")
    # uvicorn re-raises the signal it stopped on once done, with the handlers that were there before;
    # quiet ones make that a no-op, so a stop by SIGTERM/SIGINT exits 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()  # the cloud wrote its state file (if any) after every change
    return 0


if __name__ == "__main__":
    sys.exit(main())
