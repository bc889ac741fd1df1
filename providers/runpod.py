"""RunPod adapter: on-demand pods over REST v2, interruptible (spot) pods and prices over GraphQL.

Which API does what, and why (details in docs/providers/runpod.md):

* ``https://api.runpod.io/v2/pods`` (REST v2, the successor of ``https://rest.runpod.io/v1``, which RunPod
  marks deprecated) creates, reads, lists and deletes pods. It has no interruptible pods and no spot
  prices, so:
* ``https://api.runpod.io/graphql`` rents interruptible pods with a bid (``podRentInterruptable``) and
  reads GPU types with on-demand and spot prices and stock (``gpuTypes``). GraphQL reports errors as
  HTTP 200 with an ``errors`` array; they are mapped like HTTP errors.

Both live on one host, so one base URL (``config.base_url``) serves both. The pod name is our key; the
pod also carries ``SCALECTL_KEY`` and ``SCALECTL_CAPACITY`` in its environment, which is how ``list``
tells ours from look-alikes and how an ``EXITED`` interruptible pod is recognised as preempted.
"""

from __future__ import annotations

import builtins
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
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
    AuthFailed,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    Transient,
)
from providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy, classify_status
from providers.pacing import RequestBudget
from providers.registry import ProviderConfig
from providers.status import map_status
from providers.tagging import validate_key
from serving.bootstrap.container import ContainerLaunch, container_launch
from sizing.gpus import UnknownGpu, normalize_gpu
from sizing.server import ServerDescription

DEFAULT_BASE_URL = "https://api.runpod.io"
PODS = "/v2/pods"
GRAPHQL = "/graphql"
ANYWHERE = "any"  # offer region meaning "RunPod picks the data center"
KEY_ENV = "SCALECTL_KEY"
CAPACITY_ENV = "SCALECTL_CAPACITY"
TIER_ENV = "SCALECTL_TIER"

# Catalogue name -> RunPod GPU type id (the ``id`` of ``gpuTypes`` / ``gpu.id`` of a pod).
GPU_IDS: dict[str, str] = {
    "H100-SXM5-80GB": "NVIDIA H100 80GB HBM3",
    "H100-PCIe-80GB": "NVIDIA H100 PCIe",
    "H200-141GB": "NVIDIA H200",
    "B200-192GB": "NVIDIA B200",
    "A100-80GB-PCIe": "NVIDIA A100 80GB PCIe",
    "A100-80GB-SXM4": "NVIDIA A100-SXM4-80GB",
    "L40S-48GB": "NVIDIA L40S",
    "RTX4090-24GB": "NVIDIA GeForce RTX 4090",
    "RTX5090-32GB": "NVIDIA GeForce RTX 5090",
}
_CANONICAL = {v: k for k, v in GPU_IDS.items()}

# REST v2 ``status`` and GraphQL ``desiredStatus``. EXITED is decided per pod (see _status).
_STATUS: dict[str, InstanceStatus] = {
    "provisioning": InstanceStatus.PENDING,
    "starting": InstanceStatus.PENDING,
    "created": InstanceStatus.PENDING,
    "restarting": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "error": InstanceStatus.FAILED,
    "dead": InstanceStatus.FAILED,
    "terminated": InstanceStatus.TERMINATED,
}

# Error texts RunPod uses (REST ``detail`` / GraphQL ``message``), matched case-insensitively.
_NO_CAPACITY = ("no longer any instances available", "not enough free gpus", "no instances available")
_QUOTA = ("balance", "insufficient funds", "credit", "spend limit", "quota")
_AUTH = ("unauthorized", "unauthenticated", "api key", "forbidden")
_RATE = ("too many requests", "rate limit")

GPU_TYPES_QUERY = """
query ScalectlGpuTypes($gpuTypes: GpuTypeFilter, $lowestPrice: GpuLowestPriceInput!) {
  gpuTypes(input: $gpuTypes) {
    id displayName memoryInGb secureCloud communityCloud
    securePrice communityPrice secureSpotPrice communitySpotPrice
    lowestPrice(input: $lowestPrice) { minimumBidPrice uninterruptablePrice stockStatus maxUnreservedGpuCount }
  }
}
"""

DATA_CENTERS_QUERY = """
query ScalectlDataCenters { dataCenters { id name location } }
"""

RENT_INTERRUPTABLE = """
mutation ScalectlRentInterruptable($input: PodRentInterruptableInput!) {
  podRentInterruptable(input: $input) {
    id name desiredStatus costPerHr gpuCount imageName env
    machine { dataCenterId gpuTypeId }
  }
}
"""


@dataclass(frozen=True)
class RunPodOptions:
    cloud: str = "SECURE"  # SECURE, COMMUNITY or ALL
    default_image: str | None = None  # run when a launch carries no server description
    container_disk_gb: int = 80
    port_protocol: str = "tcp"  # tcp: direct public ip:port; http: RunPod's HTTPS proxy
    timeout: float = 30.0
    attempts: int = 4
    max_retry_after: float = 60.0

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RunPodOptions:
        known = set(cls.__dataclass_fields__)
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"runpod provider: unknown options {sorted(unknown)}; known: {sorted(known)}")
        made = cls(**dict(options))
        if made.cloud not in ("SECURE", "COMMUNITY", "ALL"):
            raise ValueError(f"runpod provider: options.cloud {made.cloud!r}: use SECURE, COMMUNITY or ALL")
        if made.port_protocol not in ("tcp", "http"):
            raise ValueError(f"runpod provider: options.port_protocol {made.port_protocol!r}: use tcp or http")
        if made.attempts < 1:
            raise ValueError("runpod provider: options.attempts must be at least 1")
        return made


class RunPodProvider:
    """The Provider protocol over RunPod's REST v2 and GraphQL APIs."""

    # GET /v2/pods answers with every pod of the account at once; interruptible pods end without notice.
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(bootstrap=BootstrapForm.CONTAINER, spot=True)

    @staticmethod
    def render_launch(server: ServerDescription) -> ContainerLaunch:
        return container_launch(server)

    def __init__(self, config: ProviderConfig, clock: Clock) -> None:
        self.name = config.name
        self.options = RunPodOptions.from_mapping(config.options)
        self._key = ApiKey(config)  # read on the first request
        self._data_centers: tuple[str, ...] | None = None
        self._http = ApiClient(
            provider=self.name,
            base_url=config.base_url or DEFAULT_BASE_URL,
            key=self._key,
            map_error=self._map_error,
            clock=clock,
            retry=RetryPolicy(max_attempts=self.options.attempts, max_retry_after=self.options.max_retry_after),
            timeout=self.options.timeout,
            # RunPod's REST v2 publishes no numbers but reports each user's quota on every response
            # (IETF RateLimit headers, docs.runpod.io/api-reference-v2/rate-limits): once it says none
            # remain, nothing is sent until its reset.
            budgets=(RequestBudget(clock, None, 60.0, source="RunPod: RateLimit headers"),),
        )

    def __repr__(self) -> str:
        return f"RunPodProvider(name={self.name!r})"

    @property
    def max_retries(self) -> int:
        return self._http.retry.max_retries

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> list[Offer]:
        try:
            gpu = normalize_gpu(want.gpu)
        except UnknownGpu:
            return []
        gpu_id = GPU_IDS.get(gpu)
        if gpu_id is None:
            return []  # RunPod does not rent this GPU
        found: list[Offer] = []
        for region in await self._regions(want.regions):
            lowest: dict[str, Any] = {"gpuCount": want.count}
            if self.options.cloud != "ALL":
                lowest["secureCloud"] = self.options.cloud == "SECURE"
            if region != ANYWHERE:
                lowest["dataCenterId"] = region
            data = await self._graphql(GPU_TYPES_QUERY, {"gpuTypes": {"id": gpu_id}, "lowestPrice": lowest})
            for gpu_type in _list(data.get("gpuTypes")):
                if isinstance(gpu_type, Mapping) and gpu_type.get("id") == gpu_id:
                    found.extend(self._offers_from(gpu_type, gpu, want, region))
        return found

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        try:
            validate_key(spec.key)
        except ValueError as exc:
            raise InvalidRequest(str(exc), provider=self.name) from None
        offer = spec.offer
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        try:
            gpu_id = GPU_IDS[normalize_gpu(offer.gpu)]
        except (UnknownGpu, KeyError):
            raise InvalidRequest(f"RunPod has no GPU type for {offer.gpu!r}", provider=self.name) from None
        boot = self.render_launch(spec.server) if spec.server is not None else ContainerLaunch()
        image = _image(boot, self.options.default_image, self.name)
        if spec.capacity is Capacity.SPOT:
            bid = spec.bid_per_hour if spec.bid_per_hour is not None else offer.spot_per_hour
            if bid is None or bid <= 0:
                raise InvalidRequest(
                    f"offer {offer.offer_id} has no spot price and no bid was given", provider=self.name
                )

            async def launch() -> Any:
                return await self._rent_interruptable(spec, boot, gpu_id, image, bid)
        else:

            async def launch() -> Any:
                body = self._pod_body(spec, boot, gpu_id, image)
                return await self._http.request("POST", PODS, json=body, retry=False)

        async def find_or_launch() -> ProviderInstance:
            # Looked up again before every attempt: a create that timed out may have landed. The lookup is a
            # GET and retried on its own, so one call costs at most attempts x (attempts + 1) requests.
            existing = await self._find(spec.key, retry=True)
            if existing is not None:
                return existing
            return self._view(await launch(), capacity=spec.capacity)

        return await self._http.retrying(find_or_launch)

    async def get(self, provider_id: str) -> ProviderInstance:
        return self._view(await self._http.request("GET", f"{PODS}/{provider_id}"))

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return await self._list(key_prefix, retry=True)

    async def delete(self, provider_id: str) -> None:
        try:
            await self._http.request("DELETE", f"{PODS}/{provider_id}")
        except InstanceNotFound:
            return  # already gone: success

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- requests --------------------------------------------------------------------------------
    async def _list(self, key_prefix: str, *, retry: bool) -> builtins.list[ProviderInstance]:
        # REST v2 GET /v2/pods returns every pod of the account in one response (no paging parameters).
        body = await self._http.request("GET", PODS, retry=retry)
        pods = body.get("pods") if isinstance(body, Mapping) else body
        views = [self._view(pod) for pod in _list(pods) if isinstance(pod, Mapping)]
        return [v for v in views if v.key is not None and v.key.startswith(key_prefix)]

    async def _find(self, key: str, *, retry: bool) -> ProviderInstance | None:
        for view in await self._list(key, retry=retry):
            if view.key == key and view.status is not InstanceStatus.TERMINATED:
                return view
        return None

    async def _rent_interruptable(
        self, spec: LaunchSpec, boot: ContainerLaunch, gpu_id: str, image: str, bid: float
    ) -> Any:
        count = spec.offer.gpu_count
        pod_input: dict[str, Any] = {
            "name": spec.key,
            "imageName": image,
            "gpuTypeId": gpu_id,
            "gpuCount": count,
            "bidPerGpu": round(bid / count, 4),  # RunPod bids per GPU; our bid is for the whole pod
            "cloudType": self.options.cloud,
            "containerDiskInGb": self.options.container_disk_gb,
            "volumeInGb": 0,
            "dockerArgs": shlex.join(boot.args),
            "ports": ",".join(self._ports(boot)),
            "env": [{"key": k, "value": v} for k, v in self._env_for(spec, boot).items()],
        }
        if self.options.port_protocol == "tcp":
            pod_input["supportPublicIp"] = True
        if spec.offer.region != ANYWHERE:
            pod_input["dataCenterId"] = spec.offer.region
        data = await self._graphql(RENT_INTERRUPTABLE, {"input": pod_input}, retry=False)
        pod = data.get("podRentInterruptable")
        if not isinstance(pod, Mapping) or not pod.get("id"):
            raise InsufficientCapacity("podRentInterruptable returned no pod", provider=self.name)
        return {**pod, "env": self._env_for(spec, boot), "name": pod.get("name") or spec.key}

    def _pod_body(self, spec: LaunchSpec, boot: ContainerLaunch, gpu_id: str, image: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": spec.key,
            "image": image,
            "env": self._env_for(spec, boot),
            "ports": self._ports(boot),
            "disk": self.options.container_disk_gb,
            "gpu": {"id": gpu_id, "count": spec.offer.gpu_count},
            "cloud": self.options.cloud,
        }
        if boot.args:
            body["args"] = shlex.join(boot.args)
        if spec.offer.region != ANYWHERE:
            body["dataCenterIds"] = [spec.offer.region]
        return body

    def _env_for(self, spec: LaunchSpec, boot: ContainerLaunch) -> dict[str, str]:
        env = dict(boot.env)
        env.update({KEY_ENV: spec.key, CAPACITY_ENV: spec.capacity.value, TIER_ENV: spec.tier})
        return env

    def _ports(self, boot: ContainerLaunch) -> builtins.list[str]:
        return [f"{port}/{self.options.port_protocol}" for port in boot.ports]

    async def _graphql(self, query: str, variables: Mapping[str, Any], *, retry: bool = True) -> dict[str, Any]:
        async def once() -> dict[str, Any]:
            body = await self._http.request(
                "POST", GRAPHQL, json={"query": query, "variables": dict(variables)}, retry=False
            )
            if not isinstance(body, Mapping):
                raise Transient("GraphQL answered without a JSON object", provider=self.name)
            errors = body.get("errors")
            if errors:
                raise self._graphql_error(errors)
            data = body.get("data")
            return dict(data) if isinstance(data, Mapping) else {}

        return await self._http.retrying(once) if retry else await once()

    async def _regions(self, wanted: tuple[str, ...]) -> builtins.list[str]:
        if not wanted:
            return [ANYWHERE]
        if self._data_centers is None:
            data = await self._graphql(DATA_CENTERS_QUERY, {})
            ids = (dc.get("id") for dc in _list(data.get("dataCenters")) if isinstance(dc, Mapping))
            self._data_centers = tuple(sorted(i for i in ids if isinstance(i, str)))
        unknown = [r for r in wanted if r != ANYWHERE and r not in self._data_centers]
        if unknown:
            raise InvalidRequest(
                f"unknown RunPod data center(s) {', '.join(unknown)}; data centers: "
                f"{', '.join(self._data_centers) or '(none listed)'} (or '{ANYWHERE}')",
                provider=self.name,
            )
        return list(wanted)

    # ---- translation -----------------------------------------------------------------------------
    def _offers_from(
        self, gpu_type: Mapping[str, Any], gpu: str, want: GpuRequest, region: str
    ) -> builtins.list[Offer]:
        lowest = gpu_type.get("lowestPrice")
        lowest = lowest if isinstance(lowest, Mapping) else {}
        secure = self.options.cloud == "SECURE"
        on_demand = _positive(lowest.get("uninterruptablePrice")) or _positive(
            gpu_type.get("securePrice" if secure else "communityPrice")
        )
        spot = _positive(lowest.get("minimumBidPrice")) or _positive(
            gpu_type.get("secureSpotPrice" if secure else "communitySpotPrice")
        )
        stock = lowest.get("stockStatus")
        available = isinstance(stock, str) and stock.strip().lower() in ("high", "medium", "low")
        free_gpus = lowest.get("maxUnreservedGpuCount")
        available_count = free_gpus // want.count if isinstance(free_gpus, int) and want.count else None
        offers = []
        for capacity, per_gpu in ((Capacity.ON_DEMAND, on_demand), (Capacity.SPOT, spot)):
            if per_gpu is None or want.capacity not in (None, capacity):
                continue
            total = round(per_gpu * want.count, 4)
            offers.append(
                Offer(
                    provider=self.name,
                    offer_id=f"{GPU_IDS[gpu]}|{want.count}|{region}|{capacity.value}",
                    gpu=gpu,
                    gpu_count=want.count,
                    region=region,
                    on_demand_per_hour=total if capacity is Capacity.ON_DEMAND else None,
                    spot_per_hour=total if capacity is Capacity.SPOT else None,
                    available=available,
                    available_count=available_count,
                )
            )
        return offers

    def _view(self, pod: Any, *, capacity: Capacity | None = None) -> ProviderInstance:
        if not isinstance(pod, Mapping) or not pod.get("id"):
            raise Transient("RunPod answered without a pod", provider=self.name)
        env = pod.get("env")
        env_map: Mapping[str, Any] = env if isinstance(env, Mapping) else _env_pairs(env)
        name = pod.get("name") if isinstance(pod.get("name"), str) else None
        marker = env_map.get(KEY_ENV)
        # Ours: a valid key as the name, and (when RunPod shows the env) our marker agrees with it.
        key = name if name and _is_key(name) and (env is None or marker == name) else None
        capacity = capacity or _capacity(env_map.get(CAPACITY_ENV), pod.get("interruptible"))
        raw = _text(pod.get("status")) or _text(pod.get("desiredStatus"))
        status = _status(raw, capacity)
        gpu_block = _mapping(pod.get("gpu"))
        machine = _mapping(pod.get("machine"))
        gpu_id = _text(gpu_block.get("id")) or _text(machine.get("gpuTypeId"))
        count = gpu_block.get("count", pod.get("gpuCount"))
        return ProviderInstance(
            provider=self.name,
            provider_id=str(pod["id"]),
            key=key,
            status=status,
            raw_status=raw,
            gpu=_CANONICAL.get(gpu_id),
            gpu_count=count if isinstance(count, int) else None,
            region=_text(pod.get("dataCenterId")) or _text(machine.get("dataCenterId")) or None,
            capacity=capacity,
            price_per_hour=_number(pod.get("cost", pod.get("costPerHr"))),
            address=self._address(pod) if status is InstanceStatus.RUNNING else None,
            created_at=_timestamp(pod.get("createdAt")),
        )

    def _address(self, pod: Mapping[str, Any]) -> str | None:
        """The server's endpoint: the first exposed port (ours) in the live port mappings."""
        runtime = pod.get("runtime")
        mappings = [
            p for p in _list(runtime.get("ports") if isinstance(runtime, Mapping) else None) if isinstance(p, Mapping)
        ]
        declared = [_text(p).partition("/")[0] for p in _list(pod.get("ports"))]
        server_port = int(declared[0]) if declared and declared[0].isdigit() else None
        for port in mappings:
            private = port.get("private")
            if server_port is not None and private != server_port:
                continue
            if _text(port.get("type")).lower() == "http":
                return f"{pod['id']}-{private}.proxy.runpod.net:443"
            ip, public = port.get("ip"), port.get("public")
            if isinstance(ip, str) and ip and isinstance(public, int):
                return f"{ip}:{public}"
        return None

    def _map_error(self, failure: HttpFailure) -> ProviderError:
        message = failure.message("detail", "message", "error", "title", "errors")
        if failure.path == GRAPHQL and isinstance(failure.body, Mapping) and failure.body.get("errors"):
            error = self._graphql_error(failure.body["errors"], status=failure.status)
            if not isinstance(error, InvalidRequest) or failure.status < 500:
                return error
        lowered = message.lower()
        if failure.status in (400, 409, 500, 503) and any(t in lowered for t in _NO_CAPACITY):
            return InsufficientCapacity(f"{failure.method} {failure.path}: {message}", provider=self.name)
        if failure.status in (400, 402, 403) and any(t in lowered for t in _QUOTA):
            return QuotaExceeded(f"{failure.method} {failure.path}: {message}", provider=self.name)
        return classify_status(failure, self.name, message, credential_hint=self._key.hint)

    def _graphql_error(self, errors: Any, *, status: int = 200) -> ProviderError:
        messages = [str(e.get("message", "")) for e in _list(errors) if isinstance(e, Mapping)] or [str(errors)]
        text = self._http.redact("; ".join(m for m in messages if m) or "unknown GraphQL error")[:300]
        lowered = text.lower()
        if any(t in lowered for t in _NO_CAPACITY):
            return InsufficientCapacity(text, provider=self.name)
        if any(t in lowered for t in _AUTH) or status in (401, 403):
            return AuthFailed(f"GraphQL refused the credentials (check {self._key.hint})", provider=self.name)
        if any(t in lowered for t in _QUOTA):
            return QuotaExceeded(text, provider=self.name)
        if any(t in lowered for t in _RATE) or status == 429:
            return RateLimited(text, provider=self.name)
        if "internal server error" in lowered or status >= 500:
            return Transient(text, provider=self.name)
        return InvalidRequest(text, provider=self.name)


# ---- small pure helpers --------------------------------------------------------------------------
def _image(boot: ContainerLaunch, default: str | None, provider: str) -> str:
    if boot.image:
        return boot.image
    if default:
        return default
    raise InvalidRequest(
        "RunPod needs a container image: launch a server description (the tier's serving.image), "
        "or set options.default_image in the provider block",
        provider=provider,
    )


def _status(raw: str, capacity: Capacity | None) -> InstanceStatus:
    if raw.strip().lower() == "exited":
        # scalectl never stops pods, it deletes them. An interruptible pod that exited was taken back by
        # RunPod (that is how a preemption shows). An on-demand pod that exited was stopped by someone
        # else, or for an empty balance: neither gone nor serving, so UNKNOWN (see the docs page).
        return InstanceStatus.PREEMPTED if capacity is Capacity.SPOT else InstanceStatus.UNKNOWN
    return map_status(raw, _STATUS)


def _capacity(marker: Any, interruptible: Any) -> Capacity | None:
    if isinstance(marker, str):
        try:
            return Capacity(marker)
        except ValueError:
            return None
    if isinstance(interruptible, bool):
        return Capacity.SPOT if interruptible else Capacity.ON_DEMAND
    return None


def _env_pairs(env: Any) -> dict[str, Any]:
    """GraphQL shows env as ["K=V", ...] or [{key, value}, ...]; REST as an object."""
    pairs: dict[str, Any] = {}
    for item in _list(env):
        if isinstance(item, str) and "=" in item:
            k, _, v = item.partition("=")
            pairs[k] = v
        elif isinstance(item, Mapping) and isinstance(item.get("key"), str):
            pairs[item["key"]] = item.get("value")
    return pairs


def _is_key(name: str) -> bool:
    try:
        validate_key(name)
    except ValueError:
        return False
    return True


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


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


def _positive(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and number > 0 else None


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
