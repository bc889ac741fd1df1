"""A local Lambda Cloud API (``/api/v1``) following its published OpenAPI description.

Endpoints: ``GET /instance-types`` (``{"data": {name: {instance_type, regions_with_capacity_available}}}``),
``GET /instances``, ``GET /instances/{id}``, ``POST /instance-operations/launch`` (one instance,
``{"data": {"instance_ids": [...]}}``), ``POST /instance-operations/terminate``, ``GET /ssh-keys``.
Auth: ``Authorization: Bearer <key>`` or HTTP Basic with the key as user name. Errors:
``{"error": {"code", "message", "suggestion"}}``. Launch requests closer than 12 s (and, when
enabled, any two requests closer than 1 s) get 429, measured on the injected clock's monotonic time.

Not documented, so chosen here: the 429 body (the adapter keys on the status alone), that
terminating an unknown id answers 404 ``global/object-does-not-exist``, and that a terminated
instance leaves ``GET /instances`` at once while ``GET /instances/{id}`` still shows it.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import Clock
from tests.fakes import Fault, FaultPlan, LoopbackServer

API_KEY = "secret_lambda_fake_0123456789abcdef"
SSH_KEY_NAME = "scalectl"
TOLERANCE = 1e-3  # float slack when comparing fake-clock spacings

LAUNCH_FIELDS = {
    "region_name",
    "instance_type_name",
    "ssh_key_names",
    "file_system_names",
    "name",
    "image",
    "user_data",
    "tags",
    "firewall_rulesets",
}

Handler = Callable[[Request], Awaitable[Response]]

REGIONS = {
    "us-east-1": "Virginia, USA",
    "us-west-1": "California, USA",
    "us-west-2": "Arizona, USA",
    "us-west-3": "Utah, USA",
    "us-south-1": "Texas, USA",
    "europe-central-1": "Germany",
}


def _type(name: str, cents: int, description: str, gpu: str, gpus: int) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "gpu_description": gpu,
        "price_cents_per_hour": cents,
        "specs": {"vcpus": 26 * gpus, "memory_gib": 225 * gpus, "storage_gib": 2750 * gpus, "gpus": gpus},
    }


def default_types() -> dict[str, dict[str, Any]]:
    return {
        "gpu_1x_h100_sxm5": _type("gpu_1x_h100_sxm5", 329, "1x H100 (80 GB SXM5)", "H100 (80 GB SXM5)", 1),
        "gpu_8x_h100_sxm5": _type("gpu_8x_h100_sxm5", 2392, "8x H100 (80 GB SXM5)", "H100 (80 GB SXM5)", 8),
        "gpu_1x_h100_pcie": _type("gpu_1x_h100_pcie", 249, "1x H100 (80 GB PCIe)", "H100 (80 GB PCIe)", 1),
        "gpu_1x_a100": _type("gpu_1x_a100", 129, "1x A100 (40 GB PCIe)", "A100 (40 GB PCIe)", 1),
        "gpu_1x_a100_sxm4": _type("gpu_1x_a100_sxm4", 129, "1x A100 (40 GB SXM4)", "A100 (40 GB SXM4)", 1),
        "gpu_8x_a100_80gb_sxm4": _type("gpu_8x_a100_80gb_sxm4", 1432, "8x A100 (80 GB SXM4)", "A100 (80 GB SXM4)", 8),
        "gpu_1x_a10": _type("gpu_1x_a10", 75, "1x A10 (24 GB PCIe)", "A10 (24 GB PCIe)", 1),
        "gpu_1x_gh200": _type("gpu_1x_gh200", 149, "1x GH200 (96 GB)", "GH200 (96 GB)", 1),
    }


def default_capacity() -> dict[str, dict[str, int]]:
    """Machines free per instance type and region (regions not listed have none)."""
    return {
        "gpu_1x_h100_sxm5": {"us-east-1": 50, "us-west-3": 50},
        "gpu_8x_h100_sxm5": {"us-west-3": 4},
        "gpu_1x_h100_pcie": {"us-west-1": 10},
        "gpu_1x_a100": {"us-east-1": 5},
        "gpu_1x_a100_sxm4": {"us-east-1": 5},
        "gpu_8x_a100_80gb_sxm4": {},
        "gpu_1x_a10": {"us-east-1": 20},
        "gpu_1x_gh200": {"us-east-1": 3},
    }


class FakeLambda:
    """The fake's state and HTTP app. Thread-safe: the server thread and the test both touch it."""

    def __init__(
        self,
        clock: Clock,
        *,
        api_key: str = API_KEY,
        launch_interval: float = 12.0,
        request_interval: float = 1.0,
        hang_seconds: float = 0.5,
        extra_fields: bool = False,
        refuse_repeat_terminate: bool = False,
    ):
        self.clock = clock
        self.refuse_repeat_terminate = refuse_repeat_terminate
        self.api_key = api_key
        self.launch_interval = launch_interval
        self.request_interval = request_interval
        self.hang_seconds = hang_seconds
        self.extra_fields = extra_fields
        self.types = default_types()
        self.capacity = default_capacity()
        self.instances: dict[str, dict[str, Any]] = {}
        self.ssh_keys = {SSH_KEY_NAME}
        self.faults = FaultPlan()
        self.requests: list[tuple[str, str]] = []
        self.launch_times: list[float] = []  # monotonic times of launches that were let through
        self.launch_bodies: list[dict[str, Any]] = []
        self.throttled = 0  # 429s served by the rate limits (not by injected faults)
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self._last_request: float | None = None
        self._last_launch: float | None = None
        self.app = Starlette(
            routes=[
                Route("/api/v1/instance-types", self._guard(self._instance_types), methods=["GET"]),
                Route("/api/v1/instances", self._guard(self._list), methods=["GET"]),
                Route("/api/v1/instances/{id}", self._guard(self._get), methods=["GET"]),
                Route(
                    "/api/v1/instance-operations/launch", self._guard(self._launch, is_create=True), methods=["POST"]
                ),
                Route("/api/v1/instance-operations/terminate", self._guard(self._terminate), methods=["POST"]),
                Route("/api/v1/ssh-keys", self._guard(self._ssh_keys), methods=["GET"]),
            ]
        )

    # ---- controls for tests ----------------------------------------------------------------------
    @property
    def calls(self) -> int:
        with self.lock:
            return len(self.requests)

    def set_status(self, instance_id: str, raw: str) -> None:
        with self.lock:
            self.instances[instance_id]["status"] = raw

    def make_running(self, instance_id: str) -> None:
        with self.lock:
            inst = self.instances[instance_id]
            inst["status"] = "active"
            inst["ip"] = f"198.51.100.{int(inst['id'][-4:], 16) % 250 + 1}"

    def add_foreign(self, name: str) -> str:
        with self.lock:
            return self._new_instance(name, "gpu_1x_a10", "us-east-1")["id"]

    def live(self) -> list[dict[str, Any]]:
        with self.lock:
            return [copy.deepcopy(i) for i in self.instances.values() if i["status"] in ("booting", "active")]

    # ---- plumbing --------------------------------------------------------------------------------
    @staticmethod
    def _error(status: int, code: str, message: str, suggestion: str | None = None) -> JSONResponse:
        error = {"code": code, "message": message}
        if suggestion:
            error["suggestion"] = suggestion
        return JSONResponse({"error": error}, status)

    def _guard(self, handler: Handler, *, is_create: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            now = self.clock.monotonic()
            with self.lock:
                self.requests.append((request.method, request.url.path))
                fault = self.faults.next_fault(request.method, request.url.path, is_create=is_create)
                too_soon = (
                    self.request_interval > 0
                    and self._last_request is not None
                    and now - self._last_request < self.request_interval - TOLERANCE
                )
                self._last_request = now
            if fault is Fault.SERVER_ERROR:
                return self._error(500, "global/unknown", "An unknown error occurred.")
            if fault is Fault.RATE_LIMITED or too_soon:
                if too_soon:
                    with self.lock:
                        self.throttled += 1
                return self._error(429, "global/too-many-requests", "Too many requests.", "Slow down.")
            if fault is Fault.AUTH or not self._authorised(request):
                return self._error(
                    401,
                    "global/invalid-api-key",
                    "API key was invalid, expired, or deleted.",
                    "Check your API key or create a new one, then try again.",
                )
            if fault is Fault.NO_CAPACITY:
                return self._no_capacity()
            response = await handler(request)
            if fault is Fault.TIMEOUT:
                await asyncio.sleep(self.hang_seconds)  # done server-side; the client gives up first
            return response

        return endpoint

    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        if header == f"Bearer {self.api_key}":
            return True
        if header.startswith("Basic "):
            try:
                user, _, _ = base64.b64decode(header[6:]).decode().partition(":")
            except ValueError:
                return False
            return user == self.api_key
        return False

    def _no_capacity(self) -> JSONResponse:
        return self._error(
            400,
            "instance-operations/launch/insufficient-capacity",
            "Not enough capacity to fulfill launch request.",
            "Choose an instance type with more availability, or try again later.",
        )

    def _free(self, type_name: str, region: str) -> int:
        used = sum(
            1
            for i in self.instances.values()
            if i["instance_type"]["name"] == type_name
            and i["region"]["name"] == region
            and i["status"] in ("booting", "active", "unhealthy")
        )
        return self.capacity.get(type_name, {}).get(region, 0) - used

    def _new_instance(self, name: str | None, type_name: str, region: str) -> dict[str, Any]:
        iid = f"{next(self._ids):032x}"
        inst: dict[str, Any] = {
            "id": iid,
            "name": name,
            "ip": None,  # not guaranteed until late in boot
            "private_ip": None,
            "status": "booting",
            "ssh_key_names": [SSH_KEY_NAME],
            "file_system_names": [],
            "region": {"name": region, "description": REGIONS.get(region, region)},
            "instance_type": copy.deepcopy(self.types[type_name]),
            "hostname": f"{iid[-12:]}.cloud.lambdalabs.invalid",
            "jupyter_token": "jt" + iid[-8:],
            "jupyter_url": f"https://jupyter-{iid[-8:]}.lambdaspaces.invalid",
            "is_reserved": False,
        }
        self.instances[iid] = inst
        return inst

    def _view(self, inst: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(inst)
        if self.extra_fields:
            out["actions"] = {"migrate": {"available": False}, "rebuild": {"available": True}}
            out["tags"] = [{"key": "team", "value": "x"}]
        return out

    # ---- endpoints -------------------------------------------------------------------------------
    async def _instance_types(self, request: Request) -> Response:
        with self.lock:
            data = {
                name: {
                    "instance_type": copy.deepcopy(t),
                    "regions_with_capacity_available": [
                        {"name": r, "description": REGIONS.get(r, r)}
                        for r in sorted(self.capacity.get(name, {}))
                        if self._free(name, r) > 0
                    ],
                }
                for name, t in self.types.items()
            }
        return JSONResponse({"data": data})

    async def _list(self, request: Request) -> Response:
        with self.lock:
            rows = [self._view(i) for i in self.instances.values() if i["status"] != "terminated"]
        return JSONResponse({"data": rows})

    async def _get(self, request: Request) -> Response:
        with self.lock:
            inst = self.instances.get(request.path_params["id"])
            if inst is None:
                return self._error(404, "global/object-does-not-exist", "Specified instance does not exist.")
            return JSONResponse({"data": self._view(inst)})

    async def _ssh_keys(self, request: Request) -> Response:
        keys = [{"id": f"k{i}", "name": n, "public_key": "ssh-ed25519 AAAA..."} for i, n in enumerate(self.ssh_keys)]
        return JSONResponse({"data": keys})

    async def _launch(self, request: Request) -> Response:
        body = await request.json()
        now = self.clock.monotonic()
        with self.lock:
            if self._last_launch is not None and now - self._last_launch < self.launch_interval - TOLERANCE:
                self.throttled += 1
                return self._error(429, "global/too-many-requests", "Too many launch requests.", "Slow down.")
            self._last_launch = now
            self.launch_bodies.append(body)
            invalid = self._validate_launch(body)
            if invalid is not None:
                return invalid
            type_name, region = body["instance_type_name"], body["region_name"]
            if self._free(type_name, region) <= 0:
                return self._no_capacity()
            self.launch_times.append(now)
            inst = self._new_instance(body.get("name"), type_name, region)
            return JSONResponse({"data": {"instance_ids": [inst["id"]]}})

    def _validate_launch(self, body: Any) -> JSONResponse | None:
        def invalid(message: str) -> JSONResponse:
            return self._error(400, "global/invalid-parameters", message, "Check the request parameters.")

        if not isinstance(body, dict):
            return invalid("Request body must be an object.")
        unknown = set(body) - LAUNCH_FIELDS
        if unknown:
            return invalid(f"Unknown fields: {sorted(unknown)}")
        if body.get("region_name") not in REGIONS:
            return invalid(f"Invalid region_name: {body.get('region_name')!r}")
        if body.get("instance_type_name") not in self.types:
            return invalid(f"Invalid instance_type_name: {body.get('instance_type_name')!r}")
        keys = body.get("ssh_key_names")
        if not isinstance(keys, list) or len(keys) != 1:
            return invalid("Exactly one SSH key must be specified.")
        if keys[0] not in self.ssh_keys:
            return invalid(f"SSH key {keys[0]!r} does not exist.")
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or len(name) > 64):
            return invalid("Instance name must be 64 characters or fewer.")
        user_data = body.get("user_data")
        if user_data is not None and (not isinstance(user_data, str) or len(user_data.encode()) > 1_000_000):
            return invalid("user_data must be plain text of at most 1MB.")
        return None

    async def _terminate(self, request: Request) -> Response:
        body = await request.json()
        ids = body.get("instance_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not ids:
            return self._error(400, "global/invalid-parameters", "instance_ids must be a non-empty list.")
        with self.lock:
            missing = [i for i in ids if i not in self.instances]
            if missing:
                return self._error(404, "global/object-does-not-exist", f"Instances do not exist: {missing}")
            if self.refuse_repeat_terminate and any(self.instances[i]["status"] == "terminated" for i in ids):
                return self._error(400, "global/invalid-parameters", "Instance is already terminated.")
            for iid in ids:  # terminated at once; "terminating" can be set by a test to model the slow path
                self.instances[iid]["status"] = "terminated"
            done = [self._view(self.instances[i]) for i in ids]
        return JSONResponse({"data": {"terminated_instances": done}})


def start_fake_lambda(clock: Clock, **kwargs: Any) -> tuple[FakeLambda, LoopbackServer]:
    fake = FakeLambda(clock, **kwargs)
    return fake, LoopbackServer(fake.app).start()
