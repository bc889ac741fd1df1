"""A local RunPod: the REST v2 pod endpoints and the GraphQL operations scalectl sends, with fault injection.

Follows RunPod's published REST v2 OpenAPI (``/v2/pods``: list answers ``{"pods": [...]}`` with no paging,
create answers 201 with the pod, get/delete answer 404 for unknown pods, errors are RFC 9457 problem
bodies ``{"title", "status", "detail"}``, request bodies with unknown fields are refused with 422) and
the GraphQL API at ``/graphql`` (errors as HTTP 200 with an ``errors`` array). This is not a general
GraphQL server: it recognises the root fields ``gpuTypes``, ``dataCenters`` and ``podRentInterruptable``
and reads their inputs from ``variables``, which is how the adapter sends them.

Pods start ``PROVISIONING``; ``make_running`` moves them on. ``preempt`` does what RunPod does to an
interruptible pod it takes back: the pod stays, ``EXITED``, costing nothing.

Stop and start (``POST /v2/pods/{id}/stop`` and ``/start``, as RunPod's REST API documents them): a
stopped pod shows ``EXITED``, keeps its volume and bills only storage; a start needs its GPUs free on the
same host, and when someone took them meanwhile (``take_gpu``, or a share ``resume_no_gpu_rate`` of
starts, seeded) it is refused with a 400 problem naming the lack of free GPUs, RunPod's message.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes import Fault, FaultPlan, LoopbackServer, WindowLimit

NO_CAPACITY = (
    "There are no longer any instances available with the requested specifications. Please refresh and try again."
)
NO_GPUS_TO_START = "There are not enough free GPUs on the host machine to start this pod."
STORAGE_PER_GB_HOUR = 0.2 / 730  # $0.20 per GB-month for a stopped pod's volume

GPU_TYPES: list[dict[str, Any]] = [
    {
        "id": "NVIDIA H100 80GB HBM3",
        "displayName": "H100 SXM",
        "memoryInGb": 80,
        "secureCloud": True,
        "communityCloud": True,
        "securePrice": 2.69,
        "communityPrice": 1.99,
        "secureSpotPrice": 1.75,
        "communitySpotPrice": 1.25,
    },
    {
        "id": "NVIDIA L40S",
        "displayName": "L40S",
        "memoryInGb": 48,
        "secureCloud": True,
        "communityCloud": True,
        "securePrice": 0.86,
        "communityPrice": 0.79,
        "secureSpotPrice": 0.43,
        "communitySpotPrice": 0.4,
    },
    {
        "id": "NVIDIA GeForce RTX 4090",
        "displayName": "RTX 4090",
        "memoryInGb": 24,
        "secureCloud": True,
        "communityCloud": True,
        "securePrice": 0.69,
        "communityPrice": 0.34,
        "secureSpotPrice": 0.35,
        "communitySpotPrice": 0.2,
    },
]
DATA_CENTERS = [
    {"id": "US-TX-3", "name": "US Texas 3", "location": "United States"},
    {"id": "EU-RO-1", "name": "EU Romania 1", "location": "Romania"},
    {"id": "CA-MTL-1", "name": "CA Montreal 1", "location": "Canada"},
]
CREATE_FIELDS = {"name", "image", "args", "disk", "ports", "env", "registry", "mounts", "gpu", "cpu", "cloud"}
CREATE_FIELDS |= {"dataCenterIds", "globalNetworking"}
RENT_FIELDS = {
    "bidPerGpu", "cloudType", "gpuCount", "volumeInGb", "containerDiskInGb", "minVcpuCount", "minMemoryInGb",
    "gpuTypeId", "name", "imageName", "dockerArgs", "ports", "volumeMountPath", "env", "dataCenterId",
    "countryCode", "supportPublicIp", "startSsh", "startJupyter", "templateId", "networkVolumeId",
}  # fmt: skip


@dataclass
class RunPodFake:
    api_key: str = "rpa_TESTKEY0000000000000000000000"
    capacity: dict[str, int] = field(default_factory=dict)  # gpu type id -> pods it can host at once
    timeout_delay: float = 1.0
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    interruptible: set[str] = field(default_factory=set)
    faults: FaultPlan = field(default_factory=FaultPlan)
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, query string)
    extra_fields: bool = True  # answer with fields the adapter has never seen
    capacity_failures: int = 0
    lost_creates: int = 0  # creates that succeed here but whose answer never reaches the client
    # RunPod's REST v2 limits each user per minute, hour and day and says so on every authenticated
    # response (docs.runpod.io/api-reference-v2/rate-limits: IETF ``RateLimit-Policy`` ``q``/``w`` and
    # ``RateLimit`` ``r``/``t``; 429 when a window runs out). The numbers are not published; a test
    # passes its own (requests, window seconds) and a clock. Off by default.
    quota: tuple[int, float] | None = None
    clock: Any = None
    # A new pod shows in GET /v2/pods only this long (on ``clock``) after its create: eventual consistency.
    listing_lag: float = 0.0
    visible_at: dict[str, float] = field(default_factory=dict)  # pod id -> when the listing shows it
    # ... and GET /v2/pods/{id} finds it (404 before) only this long after its create.
    get_lag: float = 0.0
    found_at: dict[str, float] = field(default_factory=dict)  # pod id -> when a get finds it
    resume_no_gpu_rate: float = 0.0  # share of starts that find the host's GPUs taken (seeded)
    gpu_taken: set[str] = field(default_factory=set)  # stopped pods whose GPUs someone else took
    _rng: random.Random = field(default_factory=lambda: random.Random(42))
    _resume_rng: random.Random = field(default_factory=lambda: random.Random(7))

    # ---- controls used by tests ------------------------------------------------------------------
    def reset(self) -> None:
        self.pods.clear()
        self.interruptible.clear()
        self.capacity.clear()
        self.faults.clear()
        self.log.clear()
        self.capacity_failures = 0
        self.lost_creates = 0
        self.quota, self._quota_window = None, None
        self.resume_no_gpu_rate = 0.0
        self.gpu_taken.clear()
        self._resume_rng = random.Random(7)

    @property
    def calls(self) -> int:
        return len(self.log)

    def make_running(self, pod_id: str) -> None:
        pod = self.pods[pod_id]
        pod["status"] = "RUNNING"
        pod["startedAt"] = _now()
        public = 40000 + len(self.pods)
        pod["runtime"] = {
            "uptime": 1,
            "gpus": [{"util": 0, "memoryUtil": 0}],
            "ports": [
                {"ip": "100.65.0.10", "private": 19123, "public": 60821, "type": "http"},
                *[
                    {"ip": "203.0.113.7", "private": int(p.split("/")[0]), "public": public, "type": "tcp"}
                    for p in pod["ports"]
                    if p.endswith("/tcp")
                ],
                *[
                    {"ip": "100.65.0.10", "private": int(p.split("/")[0]), "public": None, "type": "http"}
                    for p in pod["ports"]
                    if p.endswith("/http")
                ],
            ],
        }

    def preempt(self, pod_id: str) -> None:
        pod = self.pods[pod_id]
        pod["status"], pod["cost"], pod["runtime"] = "EXITED", 0.0, None

    def take_gpu(self, pod_id: str) -> None:
        """Someone rents the GPUs a stopped pod held: its next start is refused."""
        self.gpu_taken.add(pod_id)

    def add_foreign(self, name: str = "someone-elses-box") -> str:
        pod = self._new_pod(name, "nginx:latest", {"id": "NVIDIA L40S", "count": 1}, "SECURE", None, {}, ["80/http"])
        return str(pod["id"])

    def set_raw_status(self, pod_id: str, raw: str) -> None:
        self.pods[pod_id]["status"] = raw

    # ---- the app ---------------------------------------------------------------------------------
    def app(self) -> Any:
        app = Starlette(
            routes=[
                Route("/v2/pods", self._pods, methods=["GET", "POST"]),
                Route("/v2/pods/{pod_id}", self._pod, methods=["GET", "DELETE"]),
                Route("/v2/pods/{pod_id}/stop", self._stop, methods=["POST"]),
                Route("/v2/pods/{pod_id}/start", self._start, methods=["POST"]),
                Route("/graphql", self._graphql, methods=["POST"]),
            ]
        )

        async def with_quota_headers(scope: Any, receive: Any, send: Any) -> None:
            async def send_with_headers(message: Any) -> None:
                if message["type"] == "http.response.start" and self.quota is not None:
                    names = {k.lower() for k, _ in message.get("headers", [])}
                    if b"ratelimit" not in names:
                        extra = [(k.lower().encode(), v.encode()) for k, v in self._quota_headers().items()]
                        message = {**message, "headers": [*message.get("headers", []), *extra]}
                await send(message)

            await app(scope, receive, send_with_headers)

        return with_quota_headers

    def seed_old(self, count: int) -> None:
        """``count`` pods someone made by hand and stopped long ago (EXITED), before any of ours."""
        for i in range(count):
            pod = self._new_pod(
                f"old-notebook-{i:05d}",
                "nginx:latest",
                {"id": "NVIDIA L40S", "count": 1},
                "SECURE",
                None,
                {},
                ["80/http"],
            )
            pod["status"] = "EXITED"

    def _quota_headers(self) -> dict[str, str]:
        if self._window is None or self.quota is None:
            return {}
        limit, window = self.quota
        reset = (
            int(window)
            if not self._window._sent
            else max(1, int(self._window._sent[0] + window - self.clock.monotonic()))
        )
        return {
            "RateLimit-Policy": f'"minute";q={limit};w={int(window)}',
            "RateLimit": f'"minute";r={self._window.remaining()};t={reset}',
        }

    @property
    def _window(self) -> WindowLimit | None:
        if self.quota is None:
            return None
        if getattr(self, "_quota_window", None) is None:
            self._quota_window = WindowLimit(self.clock, *self.quota)
        return self._quota_window

    async def _gate(self, request: Request) -> Response | None:
        """Count the call, check the key, apply any injected fault. A response here ends the request."""
        self.log.append((request.method, request.url.path, request.url.query))
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _problem(401, "Unauthorized", "invalid or missing API key")
        if self._window is not None and (wait := self._window.take()) is not None:
            headers = {**self._quota_headers(), "Retry-After": str(max(1, int(wait)))}
            return _problem(429, "Too Many Requests", "rate limit exceeded", headers=headers)
        fault = self.faults.next_fault(request.method, request.url.path)
        if fault is None:
            return None
        if fault is Fault.TIMEOUT:
            await asyncio.sleep(self.timeout_delay)
            return _problem(504, "Gateway Timeout", "upstream timed out")
        if fault is Fault.AUTH:
            return _problem(401, "Unauthorized", "invalid or missing API key")
        if fault is Fault.RATE_LIMITED:
            headers = {"Retry-After": "2", "RateLimit": "limit=60, remaining=0, reset=2"}
            return _problem(429, "Too Many Requests", "rate limit exceeded", headers=headers)
        if fault is Fault.GARBAGE:
            return Response("<html>502 Bad Gateway</html>", status_code=502, media_type="text/html")
        return _problem(503, "Service Unavailable", "temporarily unavailable")

    def fail_capacity_next(self, times: int = 1) -> None:
        """The next ``times`` creates (REST or GraphQL) find no machine, as when stock runs out."""
        self.capacity_failures += times

    def _take_lost(self) -> bool:
        if self.lost_creates > 0:
            self.lost_creates -= 1
            return True
        return False

    def _take_capacity_fault(self) -> bool:
        if self.capacity_failures > 0:
            self.capacity_failures -= 1
            return True
        return False

    async def _pods(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        if request.method == "GET":
            now = self.clock.now() if self.clock is not None else 0.0
            shown = [p for p in self.pods.values() if self.visible_at.get(p["id"], 0.0) <= now]
            return JSONResponse({"pods": [self._public(p) for p in shown]})
        body = await request.json()
        unknown = sorted(set(body) - CREATE_FIELDS)
        if unknown:
            return JSONResponse(
                {"title": "Unprocessable Entity", "status": 422, "errors": [f"$.{k}: not allowed" for k in unknown]},
                status_code=422,
                media_type="application/problem+json",
            )
        missing = [k for k in ("name", "image") if not body.get(k)]
        gpu = body.get("gpu")
        if missing or not isinstance(gpu, dict) or not gpu.get("id"):
            return _problem(400, "Bad Request", f"missing {', '.join(missing) or 'gpu.id'}")
        if gpu["id"] not in {g["id"] for g in GPU_TYPES}:
            return _problem(400, "Bad Request", f"unknown GPU type {gpu['id']}")
        if self._take_capacity_fault() or not self._has_room(gpu["id"]):
            return _problem(400, "Bad Request", NO_CAPACITY)
        centers = body.get("dataCenterIds") or [DATA_CENTERS[0]["id"]]
        if centers[0] not in {d["id"] for d in DATA_CENTERS}:
            return _problem(400, "Bad Request", f"unknown data center {centers[0]}")
        pod = self._new_pod(
            body["name"], body["image"], gpu, body.get("cloud", "SECURE"), centers[0], body.get("env") or {},
            body.get("ports") or [], args=body.get("args", ""), disk=body.get("disk", 50),
        )  # fmt: skip
        if self._take_lost():
            return _problem(504, "Gateway Timeout", "upstream timed out")
        return JSONResponse(self._public(pod), status_code=201)

    async def _pod(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        pod = self.pods.get(request.path_params["pod_id"])
        if pod is None or pod["status"] == "TERMINATED":
            return _problem(404, "Not Found", "pod not found")
        if request.method == "GET" and pod["id"] in self.found_at and self.found_at[pod["id"]] > self.clock.now():
            return _problem(404, "Not Found", "pod not found")
        if request.method == "DELETE":
            pod["status"] = "TERMINATED"
            del self.pods[pod["id"]]
            return Response(status_code=204)
        return JSONResponse(self._public(pod))

    async def _stop(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        pod = self.pods.get(request.path_params["pod_id"])
        if pod is None:
            return _problem(404, "Not Found", "pod not found")
        if pod["status"] != "EXITED":
            pod["status"], pod["runtime"] = "EXITED", None
            pod["cost"] = round(pod["disk"] * STORAGE_PER_GB_HOUR, 6)  # the volume, not the GPU
        return JSONResponse(self._public(pod))

    async def _start(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        pod = self.pods.get(request.path_params["pod_id"])
        if pod is None:
            return _problem(404, "Not Found", "pod not found")
        if pod["status"] == "EXITED":
            taken = pod["id"] in self.gpu_taken or (
                self.resume_no_gpu_rate > 0 and self._resume_rng.random() < self.resume_no_gpu_rate
            )
            if taken or not self._has_room(pod["gpu"]["id"]):
                return _problem(400, "Bad Request", NO_GPUS_TO_START)
            gpu_type = next(g for g in GPU_TYPES if g["id"] == pod["gpu"]["id"])
            pod["status"], pod["cost"] = "PROVISIONING", round(gpu_type["securePrice"] * pod["gpu"]["count"], 4)
        return JSONResponse(self._public(pod))

    async def _graphql(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            if early.status_code == 401:  # RunPod's GraphQL refuses a bad key with 401 too
                return JSONResponse({"errors": [{"message": "Unauthorized request, please check your API key."}]}, 401)
            return early
        body = await request.json()
        query, variables = str(body.get("query", "")), body.get("variables") or {}
        if re.search(r"\bpodRentInterruptable\s*\(", query):
            return self._rent(variables.get("input") or {})
        if re.search(r"\bgpuTypes\b", query):
            return JSONResponse({"data": {"gpuTypes": self._gpu_types(variables)}})
        if re.search(r"\bdataCenters\b", query):
            return JSONResponse({"data": {"dataCenters": DATA_CENTERS}})
        return JSONResponse({"errors": [{"message": "Cannot query field on type Query"}]}, status_code=400)

    def _rent(self, given: dict[str, Any]) -> Response:
        unknown = sorted(set(given) - RENT_FIELDS)
        if unknown:
            message = f'Field "{unknown[0]}" is not defined by type "PodRentInterruptableInput".'
            return JSONResponse({"errors": [{"message": message}]}, status_code=400)
        gpu_type = next((g for g in GPU_TYPES if g["id"] == given.get("gpuTypeId")), None)
        if gpu_type is None or not given.get("imageName") or not given.get("bidPerGpu"):
            return _gql_error("podRentInterruptable", "gpuTypeId, imageName and bidPerGpu are required")
        secure = given.get("cloudType", "SECURE") == "SECURE"
        minimum = gpu_type["secureSpotPrice" if secure else "communitySpotPrice"]
        if float(given["bidPerGpu"]) < minimum:
            return _gql_error("podRentInterruptable", f"Your bid price is below the minimum bid of ${minimum}/hr.")
        if self._take_capacity_fault() or not self._has_room(gpu_type["id"]):
            return _gql_error("podRentInterruptable", NO_CAPACITY)
        env = {e["key"]: e["value"] for e in given.get("env") or []}
        count = int(given.get("gpuCount", 1))
        pod = self._new_pod(
            given.get("name") or "", given["imageName"], {"id": gpu_type["id"], "count": count},
            given.get("cloudType", "SECURE"), given.get("dataCenterId"), env,
            [p for p in str(given.get("ports", "")).split(",") if p], args=given.get("dockerArgs", ""),
            disk=given.get("containerDiskInGb", 50), price=round(float(given["bidPerGpu"]) * count, 4),
        )  # fmt: skip
        self.interruptible.add(pod["id"])
        if self._take_lost():
            return _problem(504, "Gateway Timeout", "upstream timed out")
        return JSONResponse(
            {
                "data": {
                    "podRentInterruptable": {
                        "id": pod["id"],
                        "name": pod["name"],
                        "desiredStatus": "RUNNING",
                        "costPerHr": pod["cost"],
                        "gpuCount": count,
                        "imageName": pod["image"],
                        "env": [f"{k}={v}" for k, v in env.items()],
                        "machineId": "m" + pod["id"][:8],
                        "machine": {"dataCenterId": pod["dataCenterId"], "gpuTypeId": gpu_type["id"]},
                    }
                }
            }
        )

    def _gpu_types(self, variables: dict[str, Any]) -> list[dict[str, Any]]:
        wanted = (variables.get("gpuTypes") or {}).get("id")
        lowest = variables.get("lowestPrice") or {}
        secure = lowest.get("secureCloud", True)
        count = int(lowest.get("gpuCount", 1))
        out = []
        for gpu in GPU_TYPES:
            if wanted and gpu["id"] != wanted:
                continue
            room = self._room(gpu["id"])
            stock = None if room <= 0 else ("High" if room >= 5 else "Low")
            row = dict(gpu)
            row["lowestPrice"] = {
                "minimumBidPrice": gpu["secureSpotPrice" if secure else "communitySpotPrice"],
                "uninterruptablePrice": gpu["securePrice" if secure else "communityPrice"],
                "stockStatus": stock,
                "maxUnreservedGpuCount": max(0, room) * count,
            }
            if self.extra_fields:
                row["__typename"] = "GpuType"
                row["cudaCores"] = 16896
            out.append(row)
        return out

    # ---- internals -------------------------------------------------------------------------------
    def _room(self, gpu_id: str) -> int:
        limit = self.capacity.get(gpu_id, 10_000)
        live = sum(1 for p in self.pods.values() if p["gpu"]["id"] == gpu_id and p["status"] != "EXITED")
        return limit - live

    def _has_room(self, gpu_id: str) -> bool:
        return self._room(gpu_id) > 0

    def _new_pod(
        self,
        name: str,
        image: str,
        gpu: dict[str, Any],
        cloud: str,
        center: str | None,
        env: dict[str, str],
        ports: list[str],
        *,
        args: str = "",
        disk: int = 50,
        price: float | None = None,
    ) -> dict[str, Any]:
        gpu_type = next(g for g in GPU_TYPES if g["id"] == gpu["id"])
        count = int(gpu.get("count", 1))
        pod_id = "".join(self._rng.choice(string.ascii_lowercase + string.digits) for _ in range(14))
        pod = {
            "id": pod_id,
            "name": name,
            "status": "PROVISIONING",
            "actions": ["stop", "restart", "terminate"],
            "image": image,
            "args": args,
            "disk": disk,
            "mounts": {},
            "ports": ports,
            "env": env,
            "registry": None,
            "cloud": "SECURE" if cloud == "ALL" else cloud,
            "dataCenterId": center or DATA_CENTERS[0]["id"],
            "template": None,
            "cost": price if price is not None else round(gpu_type["securePrice"] * count, 4),
            "locked": False,
            "tags": [],
            "runtime": None,
            "createdAt": _now(),
            "startedAt": None,
            "globalNetworking": {"enabled": False},
            "gpu": {"id": gpu["id"], "count": count},
        }
        self.pods[pod_id] = pod
        if self.listing_lag:
            if self.clock is None:
                raise ValueError("RunPodFake: listing_lag needs a clock")
            self.visible_at[pod_id] = self.clock.now() + self.listing_lag
        if self.get_lag:
            if self.clock is None:
                raise ValueError("RunPodFake: get_lag needs a clock")
            self.found_at[pod_id] = self.clock.now() + self.get_lag
        return pod

    def _public(self, pod: dict[str, Any]) -> dict[str, Any]:
        shown = dict(pod)
        if self.extra_fields:
            shown["ssh"] = {"direct": None, "proxy": {"host": "ssh.runpod.io", "port": 22}}
            shown["cudaVersion"] = "12.8"
        return shown


def _problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"title": title, "status": status, "detail": detail},
        status_code=status,
        headers=headers,
        media_type="application/problem+json",
    )


def _gql_error(path: str, message: str) -> JSONResponse:
    return JSONResponse({"errors": [{"message": message, "path": [path]}], "data": {path: None}})


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@contextlib.contextmanager
def serve_runpod(**kwargs: Any) -> Iterator[tuple[RunPodFake, str]]:
    """A ``RunPodFake`` served on 127.0.0.1 for the ``with`` block: ``(fake, base_url)``."""
    fake = RunPodFake(**kwargs)
    with LoopbackServer(fake.app()) as server:
        yield fake, server.url
