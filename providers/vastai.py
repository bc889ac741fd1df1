"""Vast.ai adapter: a marketplace of single machines ("asks"), rented on demand or interruptibly by bid.

Endpoints (details and caveats in docs/providers/vastai.md), all under ``config.base_url``
(default ``https://console.vast.ai``), with the key in an ``Authorization: Bearer`` header, never in URLs:

* ``POST /api/v0/bundles/`` searches offers (the JSON query the official CLI sends; ``type`` is
  ``on-demand`` or ``bid``). Each offer is one machine; its id is the ask id.
* ``PUT /api/v0/asks/{id}/`` rents it (``price`` set = an interruptible bid). An ask that is gone answers
  ``no_such_ask``: that is InsufficientCapacity, so placement moves on to the next offer.
* ``GET /api/v1/instances/`` lists instances, paged by ``next_token`` (25 a page);
  ``GET /api/v0/instances/{id}/`` shows one; ``DELETE /api/v0/instances/{id}/`` destroys one.

The instance ``label`` is our key; the container also gets ``SCALECTL_KEY`` / ``SCALECTL_CAPACITY`` in its
environment, which Vast shows back in ``extra_env``.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from clocks import Clock
from providers.base import (
    BootstrapForm,
    Capacity,
    GpuRequest,
    InstanceStatus,
    LaunchSpec,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from providers.errors import (
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ListingIncomplete,
    ProviderError,
    QuotaExceeded,
    Transient,
)
from providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy, classify_status
from providers.pacing import Pacer
from providers.registry import ProviderConfig
from providers.status import map_status
from providers.tagging import validate_key
from serving.bootstrap.container import ContainerLaunch, container_launch
from sizing.gpus import UnknownGpu, normalize_gpu
from sizing.server import ServerDescription

DEFAULT_BASE_URL = "https://console.vast.ai"
SEARCH = "/api/v0/bundles/"
INSTANCES = "/api/v1/instances/"
PAGE_SIZE = 25  # the v1 list's maximum
_THRESHOLD = re.compile(r"threshold\s*=\s*(\d+(?:\.\d+)?)")
MAX_PAGES = 400  # 10,000 instances: a bound, not an expectation
KEY_ENV = "SCALECTL_KEY"
CAPACITY_ENV = "SCALECTL_CAPACITY"
TIER_ENV = "SCALECTL_TIER"
_COUNTRY = re.compile(r"^[A-Za-z]{2}$")


@dataclass(frozen=True, slots=True)
class VastGpu:
    """How a catalogue GPU appears on Vast: ``gpu_name`` plus, where one name covers two sizes, a RAM bound."""

    name: str
    min_ram_mb: int | None = None
    max_ram_mb: int | None = None

    def matches(self, name: Any, ram_mb: Any) -> bool:
        if name != self.name:
            return False
        if not isinstance(ram_mb, int | float):
            return self.min_ram_mb is None and self.max_ram_mb is None
        return (self.min_ram_mb is None or ram_mb >= self.min_ram_mb) and (
            self.max_ram_mb is None or ram_mb <= self.max_ram_mb
        )


GPUS: dict[str, VastGpu] = {
    "H100-SXM5-80GB": VastGpu("H100 SXM"),
    "H100-PCIe-80GB": VastGpu("H100 PCIE"),
    "H200-141GB": VastGpu("H200"),
    "B200-192GB": VastGpu("B200"),
    "A100-80GB-PCIe": VastGpu("A100 PCIE", min_ram_mb=60_000),
    "A100-40GB-PCIe": VastGpu("A100 PCIE", max_ram_mb=60_000),
    "A100-80GB-SXM4": VastGpu("A100 SXM4", min_ram_mb=60_000),
    "L40S-48GB": VastGpu("L40S"),
    "RTX4090-24GB": VastGpu("RTX 4090"),
    "RTX5090-32GB": VastGpu("RTX 5090"),
}

# ``actual_status`` (container state). stopped/exited/offline are decided per instance in _status.
_STATUS: dict[str, InstanceStatus] = {
    "created": InstanceStatus.PENDING,
    "scheduling": InstanceStatus.PENDING,
    "loading": InstanceStatus.PENDING,
    "rebooting": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "frozen": InstanceStatus.UNKNOWN,
    "unknown": InstanceStatus.UNKNOWN,
    "offline": InstanceStatus.UNKNOWN,
}
_GONE_ASK = ("no_such_ask", "not available", "already rented", "no longer available")
_QUOTA = ("insufficient_credit", "credit", "balance", "quota")


@dataclass(frozen=True)
class VastOptions:
    default_image: str | None = None  # run when a launch carries no server description
    disk_gb: int = 80
    min_reliability: float = 0.95
    verified_only: bool = True
    max_offers: int = 20  # per search; Vast returns at most 64
    timeout: float = 30.0
    attempts: int = 4
    max_retry_after: float = 60.0
    rate_limit_wait: float = 2.0  # Vast's 429 carries no Retry-After; this is what RateLimited reports

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> VastOptions:
        known = set(cls.__dataclass_fields__)
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"vastai provider: unknown options {sorted(unknown)}; known: {sorted(known)}")
        made = cls(**dict(options))
        if not 1 <= made.max_offers <= 64:
            raise ValueError("vastai provider: options.max_offers must be between 1 and 64")
        if made.attempts < 1:
            raise ValueError("vastai provider: options.attempts must be at least 1")
        return made


class VastAIProvider:
    """The Provider protocol over Vast.ai's REST API."""

    # The instance list is paged and filtered here (labels are not searchable); an outbid rental stops unwarned.
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.CONTAINER, spot=True, list_page_size=PAGE_SIZE, list_max_pages=MAX_PAGES
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> ContainerLaunch:
        return container_launch(server)

    def __init__(self, config: ProviderConfig, clock: Clock) -> None:
        self.name = config.name
        self.options = VastOptions.from_mapping(config.options)
        self._key = ApiKey(config)  # read on the first request
        base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        base_url = base_url.removesuffix("/api/v0")  # accept the documented API root too
        self._http = ApiClient(
            provider=self.name,
            base_url=base_url,
            key=self._key,
            map_error=self._map_error,
            clock=clock,
            retry=RetryPolicy(max_attempts=self.options.attempts, max_retry_after=self.options.max_retry_after),
            timeout=self.options.timeout,
        )
        self._list_pacer = Pacer(clock, 0.0)  # spacing of list pages; learnt from Vast's 429 threshold

    def __repr__(self) -> str:
        return f"VastAIProvider(name={self.name!r})"

    @property
    def max_retries(self) -> int:
        return self._http.retry.max_retries

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> list[Offer]:
        try:
            gpu = normalize_gpu(want.gpu)
        except UnknownGpu:
            return []
        vast_gpu = GPUS.get(gpu)
        if vast_gpu is None:
            return []
        countries = _countries(want.regions, self.name)
        found: list[Offer] = []
        for capacity in (Capacity.ON_DEMAND, Capacity.SPOT):
            if want.capacity not in (None, capacity):
                continue
            body = await self._http.request("POST", SEARCH, json=self._query(vast_gpu, want, capacity, countries))
            rows = body.get("offers") if isinstance(body, Mapping) else None
            for row in _list(rows):
                offer = self._offer(row, gpu, vast_gpu, want, capacity)
                if offer is not None:
                    found.append(offer)
        return found

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        try:
            validate_key(spec.key)
        except ValueError as exc:
            raise InvalidRequest(str(exc), provider=self.name) from None
        offer = spec.offer
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        if not offer.offer_id.isdigit():
            raise InvalidRequest(f"{offer.offer_id!r} is not a Vast.ai offer (ask) id", provider=self.name)
        body = self._rent_body(spec)

        async def find_or_rent() -> ProviderInstance:
            # Looked up again before every attempt: a rental that timed out may have landed. The lookup is a
            # GET and retried on its own, so one call costs at most attempts x (attempts + 1) requests.
            existing = await self._find(spec.key)
            if existing is not None:
                return existing
            answer = await self._http.request("PUT", f"/api/v0/asks/{offer.offer_id}/", json=body, retry=False)
            if not isinstance(answer, Mapping) or not answer.get("new_contract"):
                message = answer.get("msg") if isinstance(answer, Mapping) else None
                raise InsufficientCapacity(
                    f"ask {offer.offer_id} was not rented: {message or answer}", provider=self.name
                )
            return ProviderInstance(
                provider=self.name,
                provider_id=str(answer["new_contract"]),
                key=spec.key,
                status=InstanceStatus.PENDING,
                raw_status="created",
                gpu=offer.gpu,
                gpu_count=offer.gpu_count,
                region=offer.region,
                capacity=spec.capacity,
                price_per_hour=body.get("price") or offer.price(spec.capacity),
            )

        return await self._http.retrying(find_or_rent)

    async def get(self, provider_id: str) -> ProviderInstance:
        if not provider_id.isdigit():
            raise InstanceNotFound(f"no instance {provider_id!r} (Vast.ai ids are numbers)", provider=self.name)
        body = await self._http.request("GET", f"/api/v0/instances/{provider_id}/", params={"owner": "me"})
        row = body.get("instances") if isinstance(body, Mapping) else None
        if not isinstance(row, Mapping):  # Vast answers {"instances": null} for an instance it does not know
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        return self._view(row)

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return await self._http.retrying(lambda: self._list(key_prefix))

    async def delete(self, provider_id: str) -> None:
        if not provider_id.isdigit():
            return  # no such instance can exist: nothing to delete
        try:
            await self._http.request("DELETE", f"/api/v0/instances/{provider_id}/", json={})
        except InstanceNotFound:
            return  # already gone: success

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- requests --------------------------------------------------------------------------------
    async def _list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        views: builtins.list[ProviderInstance] = []
        token: str | None = None
        for _page in range(MAX_PAGES):
            params: dict[str, Any] = {"limit": PAGE_SIZE}
            if token:
                params["after_token"] = token
            body = await self._http.request("GET", INSTANCES, params=params, retry=False, pacer=self._list_pacer)
            if not isinstance(body, Mapping):
                raise Transient("the instance list answered without a JSON object", provider=self.name)
            for row in _list(body.get("instances")):
                if isinstance(row, Mapping) and row.get("id") is not None:
                    view = self._view(row)
                    if view.key is not None and view.key.startswith(key_prefix):
                        views.append(view)
            following = body.get("next_token") if isinstance(body.get("next_token"), str) else None
            if following and following == token:
                raise ListingIncomplete("the instance list repeated its page token", provider=self.name)
            token = following
            if not token:
                return views
        raise ListingIncomplete(
            f"the instance list has more than {MAX_PAGES} pages of {PAGE_SIZE}: not all instances could be seen",
            provider=self.name,
        )

    async def _find(self, key: str) -> ProviderInstance | None:
        for view in await self._http.retrying(lambda: self._list(key)):
            if view.key == key and view.status is not InstanceStatus.TERMINATED:
                return view
        return None

    def _query(self, gpu: VastGpu, want: GpuRequest, capacity: Capacity, countries: tuple[str, ...]) -> dict[str, Any]:
        query: dict[str, Any] = {
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "external": {"eq": False},
            "gpu_name": {"eq": gpu.name},
            "num_gpus": {"eq": want.count},
            "reliability2": {"gte": self.options.min_reliability},
            "order": [["dph_total", "asc"]],
            "type": "on-demand" if capacity is Capacity.ON_DEMAND else "bid",
            "limit": self.options.max_offers,
            "allocated_storage": self.options.disk_gb,
        }
        if self.options.verified_only:
            query["verified"] = {"eq": True}
        ram: dict[str, int] = {}
        if gpu.min_ram_mb is not None:
            ram["gte"] = gpu.min_ram_mb
        if gpu.max_ram_mb is not None:
            ram["lte"] = gpu.max_ram_mb
        if ram:
            query["gpu_ram"] = ram  # MB in the raw API (the CLI multiplies its GB by 1000)
        if countries:
            query["geolocation"] = {"in": list(countries)}
        return query

    def _rent_body(self, spec: LaunchSpec) -> dict[str, Any]:
        bootstrap = self.render_launch(spec.server) if spec.server is not None else ContainerLaunch()
        env: dict[str, str] = dict(bootstrap.env)
        env.update({KEY_ENV: spec.key, CAPACITY_ENV: spec.capacity.value, TIER_ENV: spec.tier})
        for port in bootstrap.ports:
            env[f"-p {port}:{port}"] = "1"  # Vast takes port mappings as "-p" keys of the env object
        body: dict[str, Any] = {
            "client_id": "me",
            "image": _image(bootstrap, self.options.default_image, self.name),
            "env": env,
            "disk": self.options.disk_gb,
            "label": spec.key,
            "runtype": "args",
            "cancel_unavail": True,  # fail now rather than queue when the machine is taken meanwhile
        }
        if bootstrap.args:
            body["args"] = list(bootstrap.args)
        if spec.capacity is Capacity.SPOT:
            bid = spec.bid_per_hour if spec.bid_per_hour is not None else spec.offer.spot_per_hour
            if bid is None or bid <= 0:
                raise InvalidRequest(
                    f"offer {spec.offer.offer_id} has no bid price and none was given", provider=self.name
                )
            body["price"] = round(bid, 4)  # per machine $/hour: this is what makes the rental interruptible
        return body

    # ---- translation -----------------------------------------------------------------------------
    def _offer(self, row: Any, gpu: str, vast_gpu: VastGpu, want: GpuRequest, capacity: Capacity) -> Offer | None:
        if not isinstance(row, Mapping) or row.get("id") is None:
            return None
        if not vast_gpu.matches(row.get("gpu_name"), row.get("gpu_ram")) or row.get("num_gpus") != want.count:
            return None  # the search filters this already; a row that slips through is not what was asked
        price = _number(row.get("dph_total"))
        if capacity is Capacity.SPOT:
            price = _number(row.get("min_bid")) or price
        if price is None or price <= 0:
            return None
        return Offer(
            provider=self.name,
            offer_id=str(row["id"]),
            gpu=gpu,
            gpu_count=want.count,
            region=_country(row.get("geolocation")) or "unknown",
            on_demand_per_hour=round(price, 4) if capacity is Capacity.ON_DEMAND else None,
            spot_per_hour=round(price, 4) if capacity is Capacity.SPOT else None,
            available=row.get("rentable") is not False and row.get("rented") is not True,
            available_count=1,  # an offer is one machine
        )

    def _view(self, row: Mapping[str, Any]) -> ProviderInstance:
        env = _env_map(row.get("extra_env"))
        label = row.get("label") if isinstance(row.get("label"), str) else None
        marker = env.get(KEY_ENV)
        key = label if label and _is_key(label) and (not env or marker == label) else None
        capacity = _capacity(env.get(CAPACITY_ENV), row.get("is_bid"))
        status, raw = _status(row, capacity)
        return ProviderInstance(
            provider=self.name,
            provider_id=str(row["id"]),
            key=key,
            status=status,
            raw_status=raw,
            gpu=next((c for c, g in GPUS.items() if g.matches(row.get("gpu_name"), row.get("gpu_ram"))), None),
            gpu_count=row.get("num_gpus") if isinstance(row.get("num_gpus"), int) else None,
            region=_country(row.get("geolocation")),
            capacity=capacity,
            price_per_hour=_number(row.get("dph_total")),
            address=_address(row, env) if status is InstanceStatus.RUNNING else None,
            created_at=_number(row.get("start_date")),
        )

    def _map_error(self, failure: HttpFailure) -> ProviderError:
        message = failure.message("msg", "message", "error", "detail")
        code = failure.body.get("error") if isinstance(failure.body, Mapping) else None
        lowered = f"{code or ''} {message}".lower()
        where = failure.where
        if failure.path.startswith("/api/v0/asks/") and (
            failure.status in (404, 410) or any(t in lowered for t in _GONE_ASK)
        ):
            return InsufficientCapacity(f"{where}: the offer is gone ({message or failure.status})", provider=self.name)
        if failure.status in (400, 402, 403) and any(t in lowered for t in _QUOTA):
            return QuotaExceeded(f"{where}: {message}", provider=self.name)
        if code == "no_such_instance":
            return InstanceNotFound(f"{where}: {message}", provider=self.name)
        return classify_status(
            failure,
            self.name,
            message,
            credential_hint=self._key.hint,
            rate_limit_wait=self._learn_threshold(failure) or self.options.rate_limit_wait,
        )

    def _learn_threshold(self, failure: HttpFailure) -> float | None:
        """Vast's 429 names no wait in headers, but its text may name the endpoint's minimum interval
        ("API requests too frequent: endpoint threshold=1.5"): that is the wait, and the instance list
        then spaces its pages by it."""
        if failure.status != 429:
            return None
        found = _THRESHOLD.search(str(failure.body or ""))
        if found is None:
            return None
        interval = float(found.group(1))
        if failure.path.startswith(INSTANCES):
            self._list_pacer.interval = max(self._list_pacer.interval, interval)
        return interval


# ---- small pure helpers --------------------------------------------------------------------------
def _status(row: Mapping[str, Any], capacity: Capacity | None) -> tuple[InstanceStatus, str]:
    actual, intended = _text(row.get("actual_status")).lower(), _text(row.get("intended_status")).lower()
    cur, note = _text(row.get("cur_state")).lower(), _text(row.get("status_msg")).lower()
    raw = "/".join(filter(None, (actual or "null", intended, cur)))
    if cur == "unloaded" or actual in ("destroyed", "deleted"):
        return InstanceStatus.TERMINATED, raw  # released on destroy
    if capacity is Capacity.SPOT and ("outbid" in note or (intended == "running" and actual in ("stopped", "exited"))):
        # An interruptible instance stops when outbid; scalectl never stops instances itself.
        return InstanceStatus.PREEMPTED, raw
    if not actual:
        # null: still being provisioned, unless the row is empty of any state at all
        return (
            InstanceStatus.PENDING if intended in ("running", "") and cur != "stopped" else InstanceStatus.UNKNOWN
        ), raw
    if actual == "exited":
        return InstanceStatus.FAILED, raw  # the container exited unexpectedly; Vast does not restart it
    if actual == "stopped":
        return InstanceStatus.UNKNOWN, raw  # stopped by someone else: billing disk, neither gone nor serving
    return map_status(actual, _STATUS), raw


def _address(row: Mapping[str, Any], env: Mapping[str, Any]) -> str | None:
    ip = row.get("public_ipaddr")
    ports = row.get("ports")
    if not isinstance(ip, str) or not ip.strip() or not isinstance(ports, Mapping):
        return None
    declared = [k.split()[1].split(":")[0] for k in env if k.startswith("-p ") and len(k.split()) == 2]
    for private in declared or [k.split("/")[0] for k in ports]:
        for binding in _list(ports.get(f"{private}/tcp")):
            host_port = binding.get("HostPort") if isinstance(binding, Mapping) else None
            if isinstance(host_port, str | int) and str(host_port).isdigit():
                return f"{ip.strip()}:{host_port}"
    return None


def _image(bootstrap: ContainerLaunch, default: str | None, provider: str) -> str:
    if bootstrap.image:
        return bootstrap.image
    if default:
        return default
    raise InvalidRequest(
        "Vast.ai needs a container image: launch a server description (the tier's serving.image), "
        "or set options.default_image in the provider block",
        provider=provider,
    )


def _countries(regions: tuple[str, ...], provider: str) -> tuple[str, ...]:
    bad = [r for r in regions if not _COUNTRY.match(r)]
    if bad:
        raise InvalidRequest(
            f"unknown Vast.ai region(s) {', '.join(bad)}: Vast.ai regions are two-letter country codes "
            "of the machine's geolocation (for example US, CA, SE, DE)",
            provider=provider,
        )
    return tuple(r.upper() for r in regions)


def _country(geolocation: Any) -> str | None:
    """'Texas, US' -> 'US'; 'SE' -> 'SE'; anything else is kept as Vast wrote it."""
    if not isinstance(geolocation, str) or not geolocation.strip():
        return None
    last = geolocation.rsplit(",", 1)[-1].strip()
    return last.upper() if _COUNTRY.match(last) else geolocation.strip()


def _env_map(extra_env: Any) -> dict[str, Any]:
    """Vast shows the environment as [[key, value], ...]; accept an object too."""
    if isinstance(extra_env, Mapping):
        return {str(k): v for k, v in extra_env.items()}
    pairs: dict[str, Any] = {}
    for item in _list(extra_env):
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
            pairs[item[0]] = item[1]
    return pairs


def _capacity(marker: Any, is_bid: Any) -> Capacity | None:
    if isinstance(marker, str):
        try:
            return Capacity(marker)
        except ValueError:
            return None
    if isinstance(is_bid, bool):
        return Capacity.SPOT if is_bid else Capacity.ON_DEMAND
    return None


def _is_key(name: str) -> bool:
    try:
        validate_key(name)
    except ValueError:
        return False
    return True


def _list(value: Any) -> builtins.list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None
