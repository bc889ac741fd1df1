"""A local Vast.ai marketplace: offer search, renting asks, listing/showing/destroying instances, with faults.

Follows Vast.ai's API reference and official CLI/SDK: ``POST /api/v0/bundles/`` (and the older
``GET /api/v0/bundles/?q=<json>``) answers ``{"offers": [...]}``, at most 64; ``PUT /api/v0/asks/{id}/``
answers ``{"success": true, "new_contract": <instance id>}``, and an ask that is gone or taken answers
``no_such_ask``; ``GET /api/v1/instances/`` pages 25 at a time with ``next_token`` / ``after_token``;
``GET /api/v0/instances/{id}/`` answers ``{"instances": <row or null>}``; ``DELETE`` answers
``{"success": true}``. Errors are ``{"success": false, "error": <code>, "msg": <text>}``; a 429 is plain
text ("API requests too frequent") without a Retry-After header, as Vast documents. The key is read from
``Authorization: Bearer`` (or the older ``?api_key=`` query parameter, which is logged so tests can assert
the adapter never uses it).

Stop and start are ``PUT /api/v0/instances/{id}/`` with ``{"state": "stopped" | "running"}`` (what the
CLI's ``stop instance`` / ``start instance`` send), answering ``{"success": true}``. A stopped instance
bills its disk, not the GPU ("show instances"), and releases the GPU: the machine can be rented by
someone else meanwhile. A start then still answers success, but the instance stays in "scheduling" until
the GPU is free ("start instance": "subject to resource availability on the machine"); ``take_gpu`` or a
share ``resume_no_gpu_rate`` of starts (seeded) makes it so.

What the docs leave open and this fake assumes: an outbid interruptible instance shows
``actual_status: stopped`` with ``intended_status: running`` and a ``status_msg`` naming the outbid.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes import Fault, FaultPlan, LoopbackServer

MAX_SEARCH = 64
PAGE = 25


def _machines() -> list[dict[str, Any]]:
    rows = []
    spec = [
        ("H100 SXM", 1, 81559, [(2.10, 1.10, "Texas, US"), (2.25, 1.00, "Sweden, SE"), (2.40, 1.20, "Quebec, CA")]),
        ("H100 SXM", 2, 81559, [(4.30, 2.30, "Oregon, US")]),
        ("L40S", 1, 46068, [(0.70, 0.35, "Bavaria, DE"), (0.75, 0.30, "Texas, US")]),
        ("A100 PCIE", 1, 81920, [(1.10, 0.60, "Ohio, US")]),
        ("A100 PCIE", 1, 40960, [(0.80, 0.40, "Ohio, US")]),
        ("RTX 4090", 1, 24564, [(0.40, 0.20, "Taiwan, TW"), (0.35, 0.18, "Poland, PL")]),
    ]
    ask = 1_000_000
    for gpu, count, ram, prices in spec:
        for dph, bid, geo in prices:
            ask += 1
            rows.append(
                {
                    "id": ask,
                    "ask_contract_id": ask,
                    "machine_id": ask - 990_000,
                    "host_id": 4000 + ask % 97,
                    "gpu_name": gpu,
                    "num_gpus": count,
                    "gpu_ram": ram,
                    "gpu_total_ram": ram * count,
                    "dph_base": round(dph * 0.95, 4),
                    "dph_total": dph,
                    "min_bid": bid,
                    "geolocation": geo,
                    "rentable": True,
                    "rented": False,
                    "verified": True,
                    "external": False,
                    "reliability2": 0.991,
                    "cuda_max_good": 12.8,
                    "disk_space": 500.0,
                    "inet_down": 2000.0,
                    "inet_up": 1500.0,
                    "direct_port_count": 100,
                    "duration": 2_592_000.0,
                    "bundled_results": 1,
                }
            )
    return rows


@dataclass
class VastFake:
    api_key: str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    timeout_delay: float = 1.0
    machines: list[dict[str, Any]] = field(default_factory=_machines)
    instances: dict[int, dict[str, Any]] = field(default_factory=dict)
    faults: FaultPlan = field(default_factory=FaultPlan)
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, query string)
    gone_asks: int = 0
    queries: list[dict[str, Any]] = field(default_factory=list)  # search bodies, as received
    lost_rents: int = 0  # rentals that succeed here but whose answer never reaches the client
    extra_fields: bool = True
    # Vast enforces "a minimum interval between requests for a given endpoint and identity"
    # (docs.vast.ai/api-reference/rate-limits-and-errors) without publishing it: a test passes its own
    # seconds and a clock; a request too soon gets the documented plain-text 429, no Retry-After.
    min_interval: float | None = None
    clock: Any = None
    # A new rental shows in the instance lists only this long (on ``clock``) after it: eventual consistency.
    listing_lag: float = 0.0
    visible_at: dict[int, float] = field(default_factory=dict)  # instance id -> when the lists show it
    # ... and GET /api/v0/instances/{id}/ finds it (``{"instances": null}`` before) only this long after.
    get_lag: float = 0.0
    found_at: dict[int, float] = field(default_factory=dict)  # instance id -> when a get finds it
    resume_no_gpu_rate: float = 0.0  # share of starts that find the machine's GPU rented meanwhile (seeded)
    _resume_rng: random.Random = field(default_factory=lambda: random.Random(7))
    _next_id: int = 30_000_000

    # ---- controls used by tests ------------------------------------------------------------------
    @property
    def _last_by_endpoint(self) -> dict[tuple[str, str], float]:
        if not hasattr(self, "_endpoint_times"):
            self._endpoint_times: dict[tuple[str, str], float] = {}
        return self._endpoint_times

    def reset(self) -> None:
        self._last_by_endpoint.clear()
        self.min_interval = None
        self.machines = _machines()
        self.instances.clear()
        self.faults.clear()
        self.log.clear()
        self.gone_asks = 0
        self.lost_rents = 0
        self.queries.clear()
        self.resume_no_gpu_rate = 0.0
        self._resume_rng = random.Random(7)

    @property
    def calls(self) -> int:
        return len(self.log)

    def fail_capacity_next(self, times: int = 1) -> None:
        """The next ``times`` rentals find the ask taken by someone else (Vast's offers change fast)."""
        self.gone_asks += times

    def make_loading(self, instance_id: str) -> None:
        self.instances[int(instance_id)]["actual_status"] = "loading"

    def make_running(self, instance_id: str) -> None:
        row = self.instances[int(instance_id)]
        row.update(actual_status="running", status_msg="success, running", public_ipaddr="198.51.100.23")
        ports = [k.split()[1].split(":")[0] for k in dict(row["extra_env"]) if k.startswith("-p ")]
        row["ports"] = {f"{p}/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(41000 + i)}] for i, p in enumerate(ports)}

    def outbid(self, instance_id: str) -> None:
        row = self.instances[int(instance_id)]
        row.update(actual_status="stopped", cur_state="stopped", status_msg="Instance stopped: outbid", ports={})

    def take_gpu(self, instance_id: str) -> None:
        """Someone rents the machine a stopped instance of ours sits on."""
        ask = self.instances[int(instance_id)]["_ask"]
        next(m for m in self.machines if m["id"] == ask)["rented"] = True

    def set_raw_status(self, instance_id: str, raw: str) -> None:
        self.instances[int(instance_id)]["actual_status"] = raw

    def add_instance(self, label: str, env: dict[str, str]) -> str:
        """An instance as if rented earlier (machines are reused; the marketplace is not the point here)."""
        body = {"image": "vllm/vllm-openai", "label": label, "env": env, "runtype": "args"}
        return str(self._new_instance(self.machines[0], body, None)["id"])

    def add_foreign(self, label: str = "someone-elses-box") -> str:
        machine = self.machines[-1]
        return str(self._new_instance(machine, {"image": "pytorch/pytorch", "label": label, "env": {}}, None)["id"])

    def seed_old(self, count: int) -> None:
        """``count`` instances someone rented by hand before any of ours (stopped), so ours page last."""
        machine = self.machines[-1]
        for i in range(count):
            inst = self._new_instance(
                machine, {"image": "pytorch/pytorch", "label": f"old-box-{i:05d}", "env": {}}, None
            )
            inst["actual_status"] = inst["cur_state"] = inst["next_state"] = inst["intended_status"] = "stopped"

    # ---- the app ---------------------------------------------------------------------------------
    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/v0/bundles/", self._search, methods=["GET", "POST"]),
                Route("/api/v0/asks/{ask_id:int}/", self._rent, methods=["PUT"]),
                Route("/api/v1/instances/", self._list_v1, methods=["GET"]),
                Route("/api/v0/instances/", self._list_v0, methods=["GET"]),
                Route("/api/v0/instances/{instance_id}/", self._instance, methods=["GET", "DELETE", "PUT"]),
            ]
        )

    async def _gate(self, request: Request) -> Response | None:
        self.log.append((request.method, request.url.path, request.url.query))
        given = request.headers.get("authorization", "").removeprefix("Bearer ") or request.query_params.get("api_key")
        if given != self.api_key:
            return _error(401, "auth_error", "Invalid user key")
        if self.min_interval is not None:
            endpoint, now = (request.method, request.url.path.rstrip("/").rsplit("/", 1)[0]), self.clock.monotonic()
            last = self._last_by_endpoint.get(endpoint)
            if last is not None and now - last < self.min_interval:
                return PlainTextResponse(
                    f"API requests too frequent: endpoint threshold={self.min_interval:g}", status_code=429
                )
            self._last_by_endpoint[endpoint] = now
        fault = self.faults.next_fault(request.method, request.url.path)
        if fault is None:
            return None
        if fault is Fault.TIMEOUT:
            await asyncio.sleep(self.timeout_delay)
            return _error(504, "server_error", "Gateway Timeout")
        if fault is Fault.AUTH:
            return _error(401, "auth_error", "Invalid user key")
        if fault is Fault.RATE_LIMITED:
            return PlainTextResponse("API requests too frequent: endpoint threshold=1.0", status_code=429)
        if fault is Fault.GARBAGE:
            return PlainTextResponse("<html><body>502 Bad Gateway</body></html>", status_code=502)
        return _error(500, "server_error", "Internal Server Error")

    async def _search(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        if request.method == "POST":
            query = await request.json()
        else:
            query = json.loads(request.query_params.get("q") or "{}")
        self.queries.append(query)
        kind = query.get("type", "on-demand")
        rows = [dict(m) for m in self.machines if _matches(m, query)]
        rows.sort(key=lambda r: r["min_bid" if kind == "bid" else "dph_total"])  # cheapest first, whatever order says
        if kind == "bid":
            for row in rows:
                row["dph_total"] = row["min_bid"]
        return JSONResponse({"offers": rows[: min(int(query.get("limit") or MAX_SEARCH), MAX_SEARCH)]})

    async def _rent(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        ask_id = request.path_params["ask_id"]
        body = await request.json()
        machine = next((m for m in self.machines if m["id"] == ask_id), None)
        if machine is None:
            return _error(404, "no_such_ask", f"Instance type by id {ask_id} is not available.")
        if self.gone_asks > 0 or machine["rented"]:
            self.gone_asks = max(0, self.gone_asks - 1)
            return _error(410, "no_such_ask", f"Instance type by id {ask_id} is not available.")
        if not body.get("image"):
            return _error(400, "invalid_args", "image is required")
        if not isinstance(body.get("env", {}), dict):
            return _error(400, "invalid_args", "env must be an object")
        price = body.get("price")
        if price is not None and float(price) < machine["min_bid"]:
            return _error(400, "invalid_args", f"bid price {price} is below the minimum bid {machine['min_bid']}")
        row = self._new_instance(machine, body, price)
        if self.lost_rents > 0:
            self.lost_rents -= 1
            return _error(504, "server_error", "Gateway Timeout")
        return JSONResponse({"success": True, "new_contract": row["id"]})

    async def _list_v1(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        limit = max(1, min(PAGE, int(request.query_params.get("limit") or PAGE)))
        after = request.query_params.get("after_token")
        start = json.loads(base64.b64decode(after))["id"] if after else -1
        ordered = sorted(i for i in self.instances if i > start and self._listed(i))
        page = ordered[:limit]
        more = len(ordered) > limit
        token = base64.b64encode(json.dumps({"id": page[-1]}).encode()).decode() if more and page else None
        return JSONResponse(
            {
                "success": True,
                "instances_found": len(page),
                "total_instances": len(self.instances),
                "label_counts": {},
                "next_token": token,
                "instances": [self._public(self.instances[i]) for i in page],
            }
        )

    async def _list_v0(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        rows = [self._public(r) for r in self.instances.values() if self._listed(r["id"])]
        return JSONResponse({"instances_found": len(rows), "instances": rows})

    async def _instance(self, request: Request) -> Response:
        if (early := await self._gate(request)) is not None:
            return early
        raw = request.path_params["instance_id"]
        row = self.instances.get(int(raw)) if raw.isdigit() else None
        if request.method == "GET":
            found = row is not None and (row["id"] not in self.found_at or self.found_at[row["id"]] <= self.clock.now())
            return JSONResponse({"instances": self._public(row) if row and found else None})
        if row is None:
            return _error(404, "no_such_instance", f"Instance {raw} not found.")
        if request.method == "PUT":
            return self._set_state(row, await request.json())
        del self.instances[row["id"]]
        for machine in self.machines:
            if machine["id"] == row["_ask"]:
                machine["rented"] = False
        return JSONResponse({"success": True, "msg": "Instance destroyed successfully"})

    def _set_state(self, row: dict[str, Any], body: dict[str, Any]) -> Response:
        state = body.get("state")
        if state not in ("stopped", "running") or set(body) - {"state", "label"}:
            return _error(400, "invalid_args", "state must be 'stopped' or 'running'")
        machine = next(m for m in self.machines if m["id"] == row["_ask"])
        if state == "stopped" and row["intended_status"] != "stopped":
            row.update(actual_status="stopped", intended_status="stopped", cur_state="stopped", next_state="stopped")
            row.update(public_ipaddr=None, ports={}, status_msg="stopped")
            machine["rented"] = False  # the GPU is free for anyone; the disk stays (and bills)
        elif state == "running" and row["intended_status"] == "stopped":
            row.update(intended_status="running", next_state="running")
            lost = self.resume_no_gpu_rate > 0 and self._resume_rng.random() < self.resume_no_gpu_rate
            if machine["rented"] or lost:
                row.update(actual_status="scheduling", cur_state="stopped", status_msg=None)  # waits for the GPU
            else:
                machine["rented"] = True
                row.update(actual_status="loading", cur_state="running", status_msg=None)
        return JSONResponse({"success": True})

    # ---- internals -------------------------------------------------------------------------------
    def _new_instance(self, machine: dict[str, Any], body: dict[str, Any], price: Any) -> dict[str, Any]:
        self._next_id += 1
        machine["rented"] = True
        env = body.get("env") or {}
        row = {
            "id": self._next_id,
            "_ask": machine["id"],
            "actual_status": None,
            "cur_state": "running",
            "next_state": "running",
            "intended_status": "running",
            "label": body.get("label"),
            "image_uuid": body.get("image"),
            "image_args": body.get("args") or [],
            "image_runtype": body.get("runtype", "ssh"),
            "extra_env": [[k, v] for k, v in env.items()],
            "onstart": body.get("onstart"),
            "status_msg": None,
            "public_ipaddr": None,
            "ports": {},
            "machine_id": machine["machine_id"],
            "start_date": time.time(),
            "gpu_name": machine["gpu_name"],
            "num_gpus": machine["num_gpus"],
            "gpu_ram": machine["gpu_ram"],
            "geolocation": machine["geolocation"],
            "dph_total": float(price) if price is not None else machine["dph_total"],
            "disk_space": body.get("disk", 10),
        }
        self.instances[row["id"]] = row
        if self.listing_lag:
            if self.clock is None:
                raise ValueError("VastFake: listing_lag needs a clock")
            self.visible_at[row["id"]] = self.clock.now() + self.listing_lag
        if self.get_lag:
            if self.clock is None:
                raise ValueError("VastFake: get_lag needs a clock")
            self.found_at[row["id"]] = self.clock.now() + self.get_lag
        return row

    def _listed(self, instance_id: int) -> bool:
        shown_at = self.visible_at.get(instance_id)
        return shown_at is None or shown_at <= self.clock.now()

    def _public(self, row: dict[str, Any]) -> dict[str, Any]:
        shown = {k: v for k, v in row.items() if not k.startswith("_")}
        if self.extra_fields:
            shown["vmem_usage"] = 0.5
            shown["template_hash_id"] = None
        return shown


def _matches(machine: dict[str, Any], query: dict[str, Any]) -> bool:
    for name, condition in query.items():
        if name in ("order", "type", "limit", "allocated_storage", "disable_bundling") or not isinstance(
            condition, dict
        ):
            continue
        value = machine.get(name)
        if name == "geolocation" and isinstance(value, str):
            value = value.rsplit(",", 1)[-1].strip()
        for op, target in condition.items():
            ok = {
                "eq": lambda v, t: v == t,
                "neq": lambda v, t: v != t,
                "gt": lambda v, t: v is not None and v > t,
                "gte": lambda v, t: v is not None and v >= t,
                "lt": lambda v, t: v is not None and v < t,
                "lte": lambda v, t: v is not None and v <= t,
                "in": lambda v, t: v in t,
                "notin": lambda v, t: v not in t,
            }.get(op)
            if ok is None or not ok(value, target):
                return False
    return True


def _error(status: int, code: str, msg: str) -> JSONResponse:
    return JSONResponse({"success": False, "error": code, "msg": msg}, status_code=status)


@contextlib.contextmanager
def serve_vast(**kwargs: Any) -> Iterator[tuple[VastFake, str]]:
    """A ``VastFake`` served on 127.0.0.1 for the ``with`` block: ``(fake, base_url)``."""
    fake = VastFake(**kwargs)
    with LoopbackServer(fake.app()) as server:
        yield fake, server.url
