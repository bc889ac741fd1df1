"""Spheron's wire format: offer rows and deployments into our types, its error answers into our taxonomy.
Pure functions of the JSON; the adapter does the requests."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, Offer, ProviderInstance
from scalectl.providers.errors import (
    DeleteDeferred,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
)
from scalectl.providers.http import HttpFailure, classify_status, shared_status
from scalectl.providers.json_values import iso_timestamp
from scalectl.providers.spheron.options import SpheronOptions
from scalectl.providers.status import map_status
from scalectl.providers.tagging import key_from_name
from scalectl.serving.bootstrap.cloud_init import CloudConfig
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu

STATUS_TABLE: dict[str, InstanceStatus] = {
    "deploying": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "failed": InstanceStatus.FAILED,
    "terminated": InstanceStatus.TERMINATED,
    "terminated-provider": InstanceStatus.PREEMPTED,  # a spot instance taken back by the provider
    # "stopped" is deliberately absent: it still bills and will not end by itself -> UNKNOWN.
}

CAPACITY_WORDS = re.compile(
    r"capacity|not available|unavailable|out of stock|sold out|no (?:available )?(?:gpu|machine|instance|node)", re.I
)
QUOTA_WORDS = re.compile(r"balance|credit|quota|limit reached|spend", re.I)
ALREADY_GONE = re.compile(r"already (?:been )?terminated|already deleted|not found|does not exist", re.I)
SPOT_TYPES = {"SPOT"}
REF_SEP = "|"


@dataclass(frozen=True, slots=True)
class OfferRef:
    """Everything a deployment needs from the offer it is built from, carried in ``Offer.offer_id``."""

    provider: str
    gpu_type: str
    offer_id: str
    instance_type: str
    operating_system: str

    def encode(self) -> str:
        return REF_SEP.join((self.provider, self.gpu_type, self.offer_id, self.instance_type, self.operating_system))

    @classmethod
    def decode(cls, value: str, *, provider: str) -> OfferRef:
        parts = value.split(REF_SEP)
        if len(parts) != 5 or not all(parts[:4]):
            raise InvalidRequest(
                f"offer id {value!r} was not issued by this adapter (expected provider|gpuType|offerId|type|os)",
                provider=provider,
            )
        return cls(*parts)


def canonical_gpu(group: dict[str, Any], offer: dict[str, Any]) -> str | None:
    """Catalogue name for a Spheron offer, trying the most specific spelling first; None if unknown."""
    interconnect = str(offer.get("interconnectType") or "")
    memory = offer.get("gpu_memory")
    names = [str(x) for x in (offer.get("gpuType"), group.get("gpuType"), group.get("gpuModel")) if x]
    names = [re.sub(r"[-_ ]?baremetal$", "", n, flags=re.I) for n in names]
    candidates: list[str] = []
    for name in names:
        if memory and interconnect:
            candidates.append(f"{name} {int(float(memory))}GB {interconnect}")
        if interconnect:
            candidates.append(f"{name} {interconnect}")
        if memory:
            candidates.append(f"{name} {int(float(memory))}GB")
        candidates.append(name)
    if group.get("displayName"):
        candidates.append(str(group["displayName"]))
    for candidate in candidates:
        try:
            return normalize_gpu(candidate)
        except UnknownGpu:
            continue
    return None


SPHERON_CLOUD_INIT_KEYS = {"packages", "write_files", "runcmd", "bootcmd"}


def cloud_init_payload(config: CloudConfig, *, provider: str) -> dict[str, Any]:
    """Spheron's structured ``cloudInit`` (packages, writeFiles, runcmd) from our cloud-config document.

    Translated key by key from the document itself (never from rendered YAML); keys Spheron does not take
    are refused rather than silently dropped. ``bootcmd`` (every boot, in cloud-init) becomes the first
    ``runcmd`` entries: Spheron runs them on the first boot only.
    """
    doc: Mapping[str, Any] = config.doc
    unsupported = set(doc) - SPHERON_CLOUD_INIT_KEYS
    if unsupported:
        raise InvalidRequest(
            f"cloud-config: Spheron's cloudInit takes packages, write_files and runcmd; not {sorted(unsupported)}",
            provider=provider,
        )
    payload: dict[str, Any] = {}
    if doc.get("packages"):
        payload["packages"] = [str(p) for p in doc["packages"]]
    if doc.get("write_files"):
        payload["writeFiles"] = [
            {
                k: v
                for k, v in (
                    ("path", f.get("path")),
                    ("content", f.get("content", "")),
                    ("permissions", f.get("permissions")),
                    ("owner", f.get("owner")),
                    ("encoding", f.get("encoding")),
                )
                if v is not None
            }
            for f in doc["write_files"]
        ]
    # Spheron has no every-boot hook: bootcmd runs once, first, with runcmd (a reboot skips it).
    commands = [*(doc.get("bootcmd") or []), *(doc.get("runcmd") or [])]
    if commands:
        payload["runcmd"] = [c if isinstance(c, str) else shlex.join(map(str, c)) for c in commands]
    return payload


def message_of(body: Any) -> str:
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("error", "message") if isinstance(body.get(k), str)]
        if isinstance(body.get("error"), dict):
            parts.append(str(body["error"].get("message", "")))
        if body.get("code"):
            parts.insert(0, str(body["code"]))
        return ": ".join(p for p in parts if p) or "no error message"
    return str(body or "no error message")[:300]


def offers_from(
    group: dict[str, Any], raw: dict[str, Any], gpu: str, want: GpuRequest, options: SpheronOptions, *, provider: str
) -> list[Offer]:
    """Our offers (one per region) from one Spheron offer row, or none when it does not fit the request."""
    upstream = str(raw.get("provider") or "")
    instance_type = str(raw.get("instanceType") or "DEDICATED").upper()
    is_spot = instance_type in SPOT_TYPES
    capacity = Capacity.SPOT if is_spot else Capacity.ON_DEMAND
    if want.capacity not in (None, capacity):
        return []
    if options.provider and upstream != options.provider:
        return []
    if options.require_cloud_init and raw.get("supportsCloudInit") is False:
        return []
    os_name = pick_os(options, [str(o) for o in raw.get("os_options") or []])
    price = to_float(raw.get("spot_price") if is_spot and raw.get("spot_price") is not None else raw.get("price"))
    gpu_type = str(raw.get("gpuType") or group.get("gpuType") or "")
    if os_name is None or price is None or price <= 0 or not upstream or not gpu_type or not raw.get("offerId"):
        return []
    ref = OfferRef(upstream, gpu_type, str(raw["offerId"]), instance_type, os_name).encode()
    offers = []
    for region in (str(c) for c in raw.get("clusters") or []):
        if want.regions and region not in want.regions:
            continue
        offers.append(
            Offer(
                provider=provider,
                offer_id=ref,
                gpu=gpu,
                gpu_count=want.count,
                region=region,
                on_demand_per_hour=None if is_spot else price,
                spot_per_hour=price if is_spot else None,
                available=bool(raw.get("available", True)),
            )
        )
    return offers


def pick_os(options: SpheronOptions, os_options: list[str]) -> str | None:
    if options.operating_system:
        return options.operating_system if options.operating_system in os_options else None
    for option in os_options:
        if "cuda" in option.lower():
            return option
    return os_options[0] if os_options else None


def deployment_view(d: dict[str, Any], *, provider: str, key_prefix: str, server_port: int) -> ProviderInstance:
    """Our view of one deployment row (listing, get or create answer)."""
    raw_status = str(d.get("status") or "")
    status = map_status(raw_status, STATUS_TABLE)
    instance_type = str(d.get("instanceType") or "").upper()
    gpu = None
    for name in (d.get("gpuType"), d.get("gpuModelId"), d.get("gpuModel")):
        if name:
            try:
                gpu = normalize_gpu(str(name))
                break
            except UnknownGpu:
                continue
    ip = d.get("ipAddress")
    return ProviderInstance(
        provider=provider,
        provider_id=str(d.get("id") or d.get("_id") or ""),
        key=key_from_name(str(d.get("name") or ""), key_prefix),
        status=status,
        raw_status=raw_status,
        gpu=gpu,
        gpu_count=to_int(d.get("gpuCount"), default=None),
        region=str(d["region"]) if d.get("region") else None,
        capacity=(Capacity.SPOT if instance_type in SPOT_TYPES else Capacity.ON_DEMAND) if instance_type else None,
        price_per_hour=to_float(d.get("hourlyRate")),
        # The address appears while still deploying; readiness is the status, not the IP.
        address=f"{ip}:{server_port}" if ip and status is InstanceStatus.RUNNING else None,
        created_at=iso_timestamp(d.get("createdAt")) or iso_timestamp(d.get("startedAt")),
    )


def map_error(failure: HttpFailure, *, provider: str, credential_hint: str) -> ProviderError:
    """Spheron's error answers in our taxonomy (the shared statuses first, then its own words)."""
    body = failure.body
    message = message_of(body)
    details = body if isinstance(body, dict) else {}
    if shared_status(failure.status):
        return classify_status(
            failure,
            provider,
            message,
            credential_hint=credential_hint,
            rate_limit_wait=to_float(details.get("retryAfter")),
        )
    status = failure.status
    where = failure.where
    if failure.method == "DELETE" and status in (400, 409):
        if str(details.get("currentStatus") or "").lower() in ("terminated", "terminated-provider", "failed") or (
            ALREADY_GONE.search(message)
        ):
            return InstanceNotFound(f"{where}: already terminated", provider=provider)
        if details.get("canTerminate") is False:
            minutes = to_float(details.get("timeRemaining"))
            return DeleteDeferred(
                f"{where}: minimum runtime not met: {message}",
                provider=provider,
                retry_after=minutes * 60.0 if minutes is not None else None,
            )
    if status == 404:
        return InstanceNotFound(f"{where}: {message}", provider=provider)
    if status == 402 or QUOTA_WORDS.search(message):
        return QuotaExceeded(f"{where}: {message}", provider=provider)
    if CAPACITY_WORDS.search(message):
        return InsufficientCapacity(f"{where}: {message}", provider=provider)
    return InvalidRequest(f"{where}: HTTP {status}: {message}", provider=provider)


def to_int(value: Any, default: Any = 0) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def to_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
