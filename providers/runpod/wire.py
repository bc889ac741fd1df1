"""RunPod's wire format: GPU type ids, statuses, queries; pods and prices into our types, errors into our
taxonomy. Pure functions of the JSON; the adapter makes the requests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, Offer, ProviderInstance
from scalectl.providers.container import CAPACITY_ENV, capacity_of, key_if_marked
from scalectl.providers.errors import (
    AuthFailed,
    InsufficientCapacity,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    Transient,
)
from scalectl.providers.http import HttpFailure, classify_status
from scalectl.providers.json_values import as_list, as_mapping, as_number, as_text, iso_timestamp, positive
from scalectl.providers.status import map_status

DEFAULT_BASE_URL = "https://api.runpod.io"
PODS = "/v2/pods"
GRAPHQL = "/graphql"
ANYWHERE = "any"  # offer region meaning "RunPod picks the data center"

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
CANONICAL = {v: k for k, v in GPU_IDS.items()}

# REST v2 ``status`` and GraphQL ``desiredStatus``. EXITED is decided per pod (see _status).
STATUS: dict[str, InstanceStatus] = {
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
NO_CAPACITY = ("no longer any instances available", "not enough free gpus", "no instances available")
QUOTA = ("balance", "insufficient funds", "credit", "spend limit", "quota")
AUTH = ("unauthorized", "unauthenticated", "api key", "forbidden")
RATE = ("too many requests", "rate limit")

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


def offers_from(
    gpu_type: Mapping[str, Any], gpu: str, want: GpuRequest, region: str, *, cloud: str, provider: str
) -> list[Offer]:
    """Our on-demand and spot offers from one ``gpuTypes`` row, priced for the whole pod."""
    lowest = gpu_type.get("lowestPrice")
    lowest = lowest if isinstance(lowest, Mapping) else {}
    secure = cloud == "SECURE"
    on_demand = positive(lowest.get("uninterruptablePrice")) or positive(
        gpu_type.get("securePrice" if secure else "communityPrice")
    )
    spot = positive(lowest.get("minimumBidPrice")) or positive(
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
                provider=provider,
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


def pod_view(pod: Any, *, provider: str, capacity: Capacity | None = None) -> ProviderInstance:
    """Our view of a pod (REST v2 or GraphQL shape)."""
    if not isinstance(pod, Mapping) or not pod.get("id"):
        raise Transient("RunPod answered without a pod", provider=provider)
    env = pod.get("env")
    env_map: Mapping[str, Any] = env if isinstance(env, Mapping) else env_pairs(env)
    name = pod.get("name") if isinstance(pod.get("name"), str) else None
    key = key_if_marked(name, None if env is None else env_map)
    capacity = capacity or capacity_of(env_map.get(CAPACITY_ENV), pod.get("interruptible"))
    raw = as_text(pod.get("status")) or as_text(pod.get("desiredStatus"))
    status = pod_status(raw, capacity)
    gpu_block = as_mapping(pod.get("gpu"))
    machine = as_mapping(pod.get("machine"))
    gpu_id = as_text(gpu_block.get("id")) or as_text(machine.get("gpuTypeId"))
    count = gpu_block.get("count", pod.get("gpuCount"))
    return ProviderInstance(
        provider=provider,
        provider_id=str(pod["id"]),
        key=key,
        status=status,
        raw_status=raw,
        gpu=CANONICAL.get(gpu_id),
        gpu_count=count if isinstance(count, int) else None,
        region=as_text(pod.get("dataCenterId")) or as_text(machine.get("dataCenterId")) or None,
        capacity=capacity,
        price_per_hour=as_number(pod.get("cost", pod.get("costPerHr"))),
        address=pod_address(pod) if status is InstanceStatus.RUNNING else None,
        created_at=iso_timestamp(pod.get("createdAt")),
    )


def pod_address(pod: Mapping[str, Any]) -> str | None:
    """The server's endpoint: the first exposed port (ours) in the live port mappings."""
    runtime = pod.get("runtime")
    mappings = [
        p for p in as_list(runtime.get("ports") if isinstance(runtime, Mapping) else None) if isinstance(p, Mapping)
    ]
    declared = [as_text(p).partition("/")[0] for p in as_list(pod.get("ports"))]
    server_port = int(declared[0]) if declared and declared[0].isdigit() else None
    for port in mappings:
        private = port.get("private")
        if server_port is not None and private != server_port:
            continue
        if as_text(port.get("type")).lower() == "http":
            return f"{pod['id']}-{private}.proxy.runpod.net:443"
        ip, public = port.get("ip"), port.get("public")
        if isinstance(ip, str) and ip and isinstance(public, int):
            return f"{ip}:{public}"
    return None


def map_error(
    failure: HttpFailure, *, provider: str, credential_hint: str, redact: Callable[[str], str]
) -> ProviderError:
    """RunPod's REST and GraphQL error answers in our taxonomy."""
    message = failure.message("detail", "message", "error", "title", "errors")
    if failure.path == GRAPHQL and isinstance(failure.body, Mapping) and failure.body.get("errors"):
        error = graphql_error(
            failure.body["errors"],
            provider=provider,
            credential_hint=credential_hint,
            redact=redact,
            status=failure.status,
        )
        if not isinstance(error, InvalidRequest) or failure.status < 500:
            return error
    lowered = message.lower()
    if failure.status in (400, 409, 500, 503) and any(t in lowered for t in NO_CAPACITY):
        return InsufficientCapacity(f"{failure.method} {failure.path}: {message}", provider=provider)
    if failure.status in (400, 402, 403) and any(t in lowered for t in QUOTA):
        return QuotaExceeded(f"{failure.method} {failure.path}: {message}", provider=provider)
    return classify_status(failure, provider, message, credential_hint=credential_hint)


def graphql_error(
    errors: Any, *, provider: str, credential_hint: str, redact: Callable[[str], str], status: int = 200
) -> ProviderError:
    """GraphQL reports errors as HTTP 200 with an ``errors`` array: mapped like HTTP errors."""
    messages = [str(e.get("message", "")) for e in as_list(errors) if isinstance(e, Mapping)] or [str(errors)]
    text = redact("; ".join(m for m in messages if m) or "unknown GraphQL error")[:300]
    lowered = text.lower()
    if any(t in lowered for t in NO_CAPACITY):
        return InsufficientCapacity(text, provider=provider)
    if any(t in lowered for t in AUTH) or status in (401, 403):
        return AuthFailed(f"GraphQL refused the credentials (check {credential_hint})", provider=provider)
    if any(t in lowered for t in QUOTA):
        return QuotaExceeded(text, provider=provider)
    if any(t in lowered for t in RATE) or status == 429:
        return RateLimited(text, provider=provider)
    if "internal server error" in lowered or status >= 500:
        return Transient(text, provider=provider)
    return InvalidRequest(text, provider=provider)


def pod_status(raw: str, capacity: Capacity | None) -> InstanceStatus:
    if raw.strip().lower() == "exited":
        # A stopped pod shows EXITED. An interruptible pod that exited was taken back by RunPod (that is
        # how a preemption shows; scalectl never stops interruptible pods). An on-demand pod that exited
        # was stopped (by us, by someone, or for an empty balance): STOPPED, neither gone nor serving.
        return InstanceStatus.PREEMPTED if capacity is Capacity.SPOT else InstanceStatus.STOPPED
    return map_status(raw, STATUS)


def env_pairs(env: Any) -> dict[str, Any]:
    """GraphQL shows env as ["K=V", ...] or [{key, value}, ...]; REST as an object."""
    pairs: dict[str, Any] = {}
    for item in as_list(env):
        if isinstance(item, str) and "=" in item:
            k, _, v = item.partition("=")
            pairs[k] = v
        elif isinstance(item, Mapping) and isinstance(item.get("key"), str):
            pairs[item["key"]] = item.get("value")
    return pairs
