"""A local Spheron API (https://app.spheron.ai) following its documented endpoints and shapes.

Endpoints: ``GET /api/gpu-offers`` (paginated groups of offers: ``data``, ``total``, ``page``,
``limit``, ``totalPages``), ``GET /api/balance``, ``POST/GET /api/deployments``,
``GET/DELETE /api/deployments/{id}``, ``GET /api/deployments/{id}/can-terminate``. Bearer auth.
Errors are ``{"error": ..., "message": ..., "code": ...}``; 429 carries ``Retry-After`` and
``retryAfter``. DELETE before the minimum runtime answers 400 ``canTerminate: false`` with
``timeRemaining`` (minutes). Deployments go ``deploying`` -> ``running`` on command; spot ones can
be preempted to ``terminated-provider``. Time comes from the injected clock. ``listing_lag`` makes a new
deployment show in the listing only that many seconds after its create (eventual consistency), ``get_lag``
the same for ``GET /api/deployments/{id}`` (404 until then).

Limits (docs.spheron.ai/api-reference, "Rate limits"): about 100-250 requests per 15 minutes per IP
and 10 deployment creates per 15 minutes per user; over either the fake answers 429 with
``Retry-After`` and ``{"error", "code": "RATE_LIMIT_EXCEEDED", "retryAfter"}``. Both are opt-in
(``rate_limit=(250, 900)``, ``create_limit=(10, 900)``) because most tests run many ticks in a
few simulated seconds.

``GET /api/gpu-offers`` follows the reference: ``page``/``limit`` (default 10), ``instanceType`` filter;
SPOT offers only appear when ``instanceType=SPOT`` is asked for (what a spot tier saw against the API:
the default view holds dedicated, bare-metal and cluster offers).

Where the public documentation is silent the fake picks one plausible shape and the adapter accepts
the alternatives too: the body of a capacity refusal; ``GET /api/deployments`` pages with the
gpu-offers envelope (``{data, total, page, limit, totalPages}``), ``limit`` capped at 20 a page (an
account with 820 deployments needed 41 pages), oldest first; ``paginate_deployments=False`` answers
the bare array of the reference's example instead.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import math
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import Clock
from tests.fakes import Fault, FaultPlan, LoopbackServer, WindowLimit

API_KEY = "sai_pk_fake_spheron_key_0123456789"
TEAM_ID = "team-7f3a"
SSH_KEY_ID = "sshkey-42"

Handler = Callable[[Request], Awaitable[Response]]


def _offer(
    provider: str,
    offer_id: str,
    gpu_type: str,
    count: int,
    price: float,
    clusters: list[str],
    *,
    instance_type: str = "DEDICATED",
    spot_price: float | None = None,
    interconnect: str | None = None,
    gpu_memory: int = 80,
    cloud_init: bool = True,
    os_options: list[str] | None = None,
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "provider": provider,
        "offerId": offer_id,
        "name": f"{count}x {gpu_type}",
        "description": f"{count}x {gpu_type} on {provider}",
        "vcpus": 16 * count,
        "memory": 120 * count,
        "storage": 500,
        "gpuCount": count,
        "gpuType": gpu_type,
        "price": price,
        "available": True,
        "clusters": clusters,
        "gpu_memory": gpu_memory,
        "os_options": os_options or ["Ubuntu 22.04", "Ubuntu 22.04 CUDA 12.4"],
        "instanceType": instance_type,
        "supportsCloudInit": cloud_init,
    }
    if interconnect:
        raw["interconnectType"] = interconnect
    if spot_price is not None:
        raw["spot_price"] = spot_price
    return raw


def default_catalogue() -> list[dict[str, Any]]:
    """Offer groups modelled on the documented examples (prices from the spring-2026 seeds)."""
    groups = [
        (
            "H100-SXM5",
            "H100",
            "H100 SXM5 80GB",
            [
                _offer("voltage-park", "vp-h100-sxm5-1x", "H100-SXM5", 1, 2.40, ["us-dallas-1"], interconnect="SXM5"),
                _offer("spheron-ai", "sai-h100-sxm5-1x", "H100-SXM5", 1, 2.90, ["us-east-1"], interconnect="SXM5"),
                _offer(
                    "data-crunch", "dc-h100-sxm5-8x", "H100-SXM5", 8, 19.20, ["FIN-01", "FIN-02"], interconnect="SXM5"
                ),
                _offer(
                    "spheron-ai",
                    "sai-h100-sxm5-spot",
                    "H100-SXM5",
                    1,
                    2.20,
                    ["us-east-1", "eu-west-1"],
                    instance_type="SPOT",
                    spot_price=0.99,
                    interconnect="SXM5",
                ),
                _offer(
                    "sesterce",
                    "ses-h100-sxm5-1x",
                    "H100-SXM5",
                    1,
                    2.10,
                    ["eu-west-1"],
                    interconnect="SXM5",
                    cloud_init=False,
                    os_options=["Ubuntu Server 22.04 LTS R570 CUDA 12.8"],
                ),
            ],
        ),
        (
            "a100-80gb-pcie",
            "A100",
            "A100 80GB PCIe",
            [
                _offer(
                    "massed-compute",
                    "mc-a100-pcie-1x",
                    "a100-80gb-pcie",
                    1,
                    1.04,
                    ["us-central-9"],
                    interconnect="PCIe",
                    os_options=["Ubuntu Server 22.04"],
                ),
            ],
        ),
        (
            "rtx-4090",
            "RTX 4090",
            "RTX 4090",
            [
                _offer("spheron-ai", "sai-4090-1x", "rtx-4090", 1, 0.39, ["us-east-1"], gpu_memory=24),
                _offer(
                    "spheron-ai",
                    "sai-4090-spot",
                    "rtx-4090",
                    1,
                    0.39,
                    ["us-east-1"],
                    instance_type="SPOT",
                    spot_price=0.25,
                    gpu_memory=24,
                ),
            ],
        ),
        (
            "GH200",
            "GH200",
            "GH200 96GB",
            [  # not in our catalogue: must be skipped, not crash
                _offer("voltage-park", "vp-gh200-1x", "GH200", 1, 1.49, ["us-dallas-1"], gpu_memory=96),
            ],
        ),
    ]
    data = []
    for gpu_type, model, display, offers in groups:
        prices = [o["price"] for o in offers]
        data.append(
            {
                "gpuType": gpu_type,
                "gpuModel": model,
                "displayName": display,
                "totalAvailable": len(offers),
                "lowestPrice": min(prices),
                "highestPrice": max(prices),
                "averagePrice": round(sum(prices) / len(prices), 4),
                "providers": sorted({o["provider"] for o in offers}),
                "offers": offers,
            }
        )
    return data


class FakeSpheron:
    """The fake's state and its HTTP app. Thread-safe: the server thread and the test both touch it."""

    def __init__(
        self,
        clock: Clock,
        *,
        api_key: str = API_KEY,
        minimum_runtime_minutes: int = 20,
        paginate_deployments: bool = True,
        deployments_page_max: int = 20,
        paging_fields: bool = True,  # False: pages carry only ``data`` (a server that hides how many follow)
        rate_limit: tuple[int, float] | None = None,  # (requests, seconds), e.g. (250, 900)
        create_limit: tuple[int, float] | None = None,  # (creates, seconds), e.g. (10, 900)
        hang_seconds: float = 0.5,
        extra_fields: bool = False,
        ip_address: str | None = None,  # every deployment's IP (e.g. 127.0.0.1 in front of a stand-in)
        listing_lag: float = 0.0,  # a new deployment shows in GET /api/deployments only this long after its create
        get_lag: float = 0.0,  # ... and GET /api/deployments/{id} finds it (404 before) only this long after
    ):
        self.clock = clock
        self.ip_address = ip_address
        self.listing_lag = listing_lag
        self.get_lag = get_lag
        self.api_key = api_key
        self.minimum_runtime_minutes = minimum_runtime_minutes
        self.paginate_deployments = paginate_deployments
        self.deployments_page_max = deployments_page_max
        self.paging_fields = paging_fields
        self.before_list_page: Callable[[int], None] | None = None  # test hook: runs before page N is served
        self.rate_limit = WindowLimit(clock, *rate_limit) if rate_limit else None
        self.create_limit = WindowLimit(clock, *create_limit) if create_limit else None
        self.hang_seconds = hang_seconds
        self.extra_fields = extra_fields
        self.catalogue = default_catalogue()
        self.deployments: dict[str, dict[str, Any]] = {}
        self.capacity: dict[str, int] = {}  # offerId -> machines it can hand out (default unlimited)
        self.faults = FaultPlan()
        self.requests: list[tuple[str, str]] = []
        self.create_bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self.app = Starlette(
            routes=[
                Route("/api/gpu-offers", self._guard(self._offers), methods=["GET"]),
                Route("/api/balance", self._guard(self._balance), methods=["GET"]),
                Route("/api/deployments", self._guard(self._list), methods=["GET"]),
                Route("/api/deployments", self._guard(self._create, is_create=True), methods=["POST"]),
                Route("/api/deployments/{id}/can-terminate", self._guard(self._can_terminate), methods=["GET"]),
                Route("/api/deployments/{id}", self._guard(self._get), methods=["GET"]),
                Route("/api/deployments/{id}", self._guard(self._delete), methods=["DELETE"]),
            ]
        )

    # ---- controls for tests ----------------------------------------------------------------------
    @property
    def calls(self) -> int:
        with self.lock:
            return len(self.requests)

    def set_status(self, deployment_id: str, raw: str) -> None:
        with self.lock:
            self.deployments[deployment_id]["status"] = raw

    def make_running(self, deployment_id: str) -> None:
        self.set_status(deployment_id, "running")

    def preempt(self, deployment_id: str) -> None:
        with self.lock:
            d = self.deployments[deployment_id]
            d["status"], d["stoppedAt"] = "terminated-provider", self._iso()

    def set_capacity(self, offer_id: str, machines: int) -> None:
        with self.lock:
            self.capacity[offer_id] = machines

    def set_available(self, offer_id: str, available: bool) -> None:
        with self.lock:
            self._find_offer_by_id(offer_id)["available"] = available

    def add_foreign(self, name: str) -> str:
        """A deployment someone made by hand in the same team (not named with our key prefix)."""
        with self.lock:
            raw = self.catalogue[2]["offers"][0]
            return self._new_deployment(name, raw, raw["clusters"][0], raw["instanceType"])["id"]

    def seed_old(self, count: int, *, live_every: int = 0) -> None:
        """``count`` deployments made by hand long ago (terminated; every ``live_every``-th still running),
        named like a person would, so ours land on the last page of the list."""
        with self.lock:
            raw = self.catalogue[2]["offers"][0]
            for i in range(count):
                d = self._new_deployment(f"old-notebook-{i:05d}", raw, raw["clusters"][0], raw["instanceType"])
                running = live_every and i % live_every == 0
                d["status"] = "running" if running else "terminated"

    def live(self) -> list[dict[str, Any]]:
        with self.lock:
            return [copy.deepcopy(d) for d in self.deployments.values() if d["status"] in ("deploying", "running")]

    # ---- plumbing --------------------------------------------------------------------------------
    def _iso(self, t: float | None = None) -> str:
        return datetime.fromtimestamp(self.clock.now() if t is None else t, UTC).isoformat().replace("+00:00", "Z")

    def _guard(self, handler: Handler, *, is_create: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            with self.lock:
                self.requests.append((request.method, request.url.path))
                fault = self.faults.next_fault(request.method, request.url.path, is_create=is_create)
            if fault is Fault.SERVER_ERROR:
                return JSONResponse({"error": "Internal server error", "code": "INTERNAL_ERROR"}, 503)
            wait = self._throttle(is_create)
            if fault is Fault.RATE_LIMITED or wait is not None:
                seconds = max(1, math.ceil(wait if wait is not None else 30))
                body = {"error": "Too many requests", "code": "RATE_LIMIT_EXCEEDED", "retryAfter": seconds}
                return JSONResponse(body, 429, headers={"Retry-After": str(seconds)})
            if fault is Fault.AUTH or not self._authorised(request):
                return JSONResponse({"error": "Unauthorized", "message": "Invalid or missing API key"}, 401)
            if fault is Fault.NO_CAPACITY:
                return self._no_capacity()
            response = await handler(request)
            if fault is Fault.TIMEOUT:
                await asyncio.sleep(self.hang_seconds)  # done server-side; the client gives up first
            return response

        return endpoint

    def _throttle(self, is_create: bool) -> float | None:
        with self.lock:
            for limit in (self.rate_limit, self.create_limit if is_create else None):
                if limit is not None:
                    wait = limit.take()
                    if wait is not None:
                        return wait
        return None

    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization")
        if header is None:
            return request.url.path == "/api/gpu-offers"  # the one public endpoint
        return header == f"Bearer {self.api_key}"

    @staticmethod
    def _no_capacity() -> JSONResponse:
        body = {
            "error": "Offer not available",
            "message": "The selected offer is currently not available. Please choose another offer.",
            "code": "OFFER_UNAVAILABLE",
        }
        return JSONResponse(body, 400)

    def _find_offer(self, provider: str, offer_id: str) -> dict[str, Any] | None:
        for group in self.catalogue:
            for raw in group["offers"]:
                if raw["provider"] == provider and raw["offerId"] == offer_id:
                    return raw
        return None

    def _find_offer_by_id(self, offer_id: str) -> dict[str, Any]:
        for group in self.catalogue:
            for raw in group["offers"]:
                if raw["offerId"] == offer_id:
                    return raw
        raise KeyError(offer_id)

    def _view(self, d: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in d.items() if not k.startswith("_")}
        if self.extra_fields:
            out["kubernetesAddon"] = None
            out["someFieldAddedLater"] = {"nested": [1, 2, 3]}
        return out

    def _new_deployment(self, name: str, raw: dict[str, Any], region: str, instance_type: str) -> dict[str, Any]:
        did = f"dep-{next(self._ids):05d}"
        d = {
            "id": did,
            "name": name,
            "providerId": raw["provider"],
            "gpuModelId": raw["gpuType"],
            "gpuType": raw["gpuType"],
            "gpuCount": raw["gpuCount"],
            "region": region,
            "instanceType": instance_type,
            "sshKeyId": SSH_KEY_ID,
            "ipAddress": self.ip_address
            or f"203.0.113.{int(did[-3:]) % 250 + 1}",  # set while still deploying, as measured
            "user": "ubuntu",
            "status": "deploying",
            "startedAt": self._iso(),
            "stoppedAt": None,
            "totalCost": 0,
            "hourlyRate": raw.get("spot_price") if instance_type == "SPOT" else raw["price"],
            "vcpus": raw["vcpus"],
            "memory": raw["memory"],
            "storage": raw["storage"],
            "sshPort": 22,
            "createdAt": self._iso(),
            "_offer": raw["offerId"],
            "_started": self.clock.now(),
        }
        self.deployments[did] = d
        return d

    # ---- endpoints -------------------------------------------------------------------------------
    async def _offers(self, request: Request) -> Response:
        page = max(1, int(request.query_params.get("page", 1)))
        limit = max(1, int(request.query_params.get("limit", 10)))
        wanted_type = request.query_params.get("instanceType")
        with self.lock:
            groups = copy.deepcopy(self.catalogue)
        for g in groups:
            if wanted_type:
                g["offers"] = [o for o in g["offers"] if o["instanceType"] == wanted_type]
            else:  # the default view: no spot offers unless asked for
                g["offers"] = [o for o in g["offers"] if o["instanceType"] != "SPOT"]
        groups = [g for g in groups if g["offers"]]
        if self.extra_fields:
            for g in groups:
                g["newGroupField"] = "x"
                for o in g["offers"]:
                    o["extras"] = {"deployment_type": "vm", "nvlink": True}
        total_pages = max(1, math.ceil(len(groups) / limit))
        body = {
            "data": groups[(page - 1) * limit : page * limit],
            "total": len(groups),
            "page": page,
            "limit": limit,
            "totalPages": total_pages,
        }
        return JSONResponse(body)

    async def _balance(self, request: Request) -> Response:
        teams = [{"teamId": TEAM_ID, "teamName": "fleet", "balance": 500.0, "isCurrentTeam": True, "role": "owner"}]
        return JSONResponse({"teams": teams, "currency": "USD"})

    async def _create(self, request: Request) -> Response:
        body = await request.json()
        with self.lock:
            self.create_bodies.append(body)
            missing = [
                k
                for k in ("provider", "offerId", "gpuType", "gpuCount", "region", "operatingSystem", "instanceType")
                if body.get(k) in (None, "")
            ]
            if missing:
                return JSONResponse({"error": "Validation failed", "message": f"Missing fields: {missing}"}, 400)
            if not body.get("teamId"):
                return JSONResponse({"error": "Team ID is required for authenticated deployments"}, 400)
            if body["teamId"] != TEAM_ID:
                return JSONResponse({"error": "Forbidden", "message": "Not a member of this team"}, 403)
            if not body.get("sshKeyId") and not body.get("ssh_public_key"):
                return JSONResponse({"error": "An SSH key is required (sshKeyId or ssh_public_key)"}, 400)
            if body.get("sshKeyId") and body["sshKeyId"] != SSH_KEY_ID:
                return JSONResponse({"error": "SSH key not found"}, 404)
            raw = self._find_offer(body["provider"], body["offerId"])
            if raw is None:
                return JSONResponse({"error": "Offer not found", "message": "Unknown provider/offerId"}, 404)
            problems = []
            if body["gpuType"] != raw["gpuType"]:
                problems.append("gpuType does not match the offer")
            if int(body["gpuCount"]) != raw["gpuCount"]:
                problems.append("gpuCount does not match the offer")
            if body["region"] not in raw["clusters"]:
                problems.append(f"region must be one of {raw['clusters']}")
            if body["operatingSystem"] not in raw["os_options"]:
                problems.append(f"operatingSystem must be one of {raw['os_options']}")
            if body["instanceType"] != raw["instanceType"]:
                problems.append(f"instanceType must be {raw['instanceType']} for this offer")
            if body.get("cloudInit") and not raw["supportsCloudInit"]:
                problems.append("this offer does not support cloudInit")
            if problems:
                return JSONResponse({"error": "Invalid deployment request", "message": "; ".join(problems)}, 400)
            in_use = sum(
                1
                for d in self.deployments.values()
                if d["_offer"] == raw["offerId"] and d["status"] in ("deploying", "running")
            )
            if not raw["available"] or in_use >= self.capacity.get(raw["offerId"], 10_000):
                return self._no_capacity()
            d = self._new_deployment(
                str(body.get("name") or f"{raw['gpuType']}-{raw['provider']}"),
                raw,
                body["region"],
                body["instanceType"],
            )
            return JSONResponse(self._view(d), 201)

    async def _list(self, request: Request) -> Response:
        if self.before_list_page is not None:
            self.before_list_page(max(1, int(request.query_params.get("page", 1))))
        with self.lock:
            shown_before = self.clock.now() - self.listing_lag  # the listing lags behind creates, as clouds do
            rows = [self._view(d) for d in self.deployments.values() if d["_started"] <= shown_before]
        if not self.paginate_deployments:
            return JSONResponse(rows)
        page = max(1, int(request.query_params.get("page", 1)))
        limit = min(self.deployments_page_max, max(1, int(request.query_params.get("limit", 10))))
        pages = max(1, math.ceil(len(rows) / limit))
        body = {
            "data": rows[(page - 1) * limit : page * limit],
            "total": len(rows),
            "page": page,
            "limit": limit,
            "totalPages": pages,
        }
        if not self.paging_fields:
            body = {"data": body["data"]}
        return JSONResponse(body)

    async def _get(self, request: Request) -> Response:
        with self.lock:
            d = self.deployments.get(request.path_params["id"])
            if d is None or d["_started"] > self.clock.now() - self.get_lag:  # a get lags behind creates too
                return JSONResponse({"error": "Deployment not found"}, 404)
            return JSONResponse(self._view(d))

    def _runtime_check(self, d: dict[str, Any]) -> dict[str, Any]:
        runtime_min = (self.clock.now() - d["_started"]) / 60.0
        remaining = max(0, math.ceil(self.minimum_runtime_minutes - runtime_min))
        return {
            "canTerminate": remaining == 0,
            "runtime": int(runtime_min),
            "timeRemaining": remaining,
            "minimumRuntime": self.minimum_runtime_minutes,
        }

    async def _can_terminate(self, request: Request) -> Response:
        with self.lock:
            d = self.deployments.get(request.path_params["id"])
            if d is None:
                return JSONResponse({"error": "Deployment not found"}, 404)
            return JSONResponse(self._runtime_check(d))

    async def _delete(self, request: Request) -> Response:
        with self.lock:
            d = self.deployments.get(request.path_params["id"])
            if d is None:
                return JSONResponse({"error": "Deployment not found"}, 404)
            if d["status"] in ("terminated", "terminated-provider", "failed"):
                body = {
                    "error": "Cannot terminate instance",
                    "message": "Instance has already been terminated.",
                    "currentStatus": d["status"],
                    "canTerminate": False,
                }
                return JSONResponse(body, 400)
            check = self._runtime_check(d)
            if not check["canTerminate"]:
                body = {
                    "error": "Minimum runtime not met",
                    "message": f"Instance must run for at least {self.minimum_runtime_minutes} minutes. "
                    f"Time remaining: {check['timeRemaining']} minutes.",
                    **check,
                }
                return JSONResponse(body, 400)
            d["status"], d["stoppedAt"] = "terminated", self._iso()
            return JSONResponse(
                {
                    "message": "Deployment terminated",
                    "deployment": {"id": d["id"], "status": d["status"], "stoppedAt": d["stoppedAt"]},
                }
            )


def start_fake_spheron(clock: Clock, **kwargs: Any) -> tuple[FakeSpheron, LoopbackServer]:
    fake = FakeSpheron(clock, **kwargs)
    return fake, LoopbackServer(fake.app).start()


@contextmanager
def booting_spheron(clock: Clock, every: float = 0.2, **kwargs: Any) -> Iterator[tuple[FakeSpheron, LoopbackServer]]:
    """A started fake whose deployments finish deploying a moment after they are created (as machines do),
    for tests and benchmarks that run the daemon as a process against it. Stops the server on exit."""
    fake, server = start_fake_spheron(clock, **kwargs)
    stop = threading.Event()

    def boot() -> None:
        while not stop.wait(every):
            with fake.lock:
                for d in fake.deployments.values():
                    if d["status"] == "deploying":
                        d["status"] = "running"

    booter = threading.Thread(target=boot, daemon=True)
    booter.start()
    try:
        yield fake, server
    finally:
        stop.set()
        booter.join(timeout=5)
        server.stop()
