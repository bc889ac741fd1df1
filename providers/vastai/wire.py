"""Vast.ai's wire format: GPU names, statuses, the search query; offers and instances into our types.
Pure functions of the JSON; the adapter makes the requests."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, Offer, ProviderInstance
from scalectl.providers.container import CAPACITY_ENV, capacity_of, key_if_marked
from scalectl.providers.errors import InvalidRequest
from scalectl.providers.json_values import as_list, as_number, as_text
from scalectl.providers.status import map_status
from scalectl.providers.vastai.options import VastOptions

DEFAULT_BASE_URL = "https://console.vast.ai"
SEARCH = "/api/v0/bundles/"
INSTANCES = "/api/v1/instances/"
PAGE_SIZE = 25  # the v1 list's maximum
THRESHOLD = re.compile(r"threshold\s*=\s*(\d+(?:\.\d+)?)")
MAX_PAGES = 400  # 10,000 instances: a bound, not an expectation
COUNTRY = re.compile(r"^[A-Za-z]{2}$")


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
STATUS: dict[str, InstanceStatus] = {
    "created": InstanceStatus.PENDING,
    "scheduling": InstanceStatus.PENDING,
    "loading": InstanceStatus.PENDING,
    "rebooting": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "frozen": InstanceStatus.UNKNOWN,
    "unknown": InstanceStatus.UNKNOWN,
    "offline": InstanceStatus.UNKNOWN,
}
GONE_ASK = ("no_such_ask", "not available", "already rented", "no longer available")
QUOTA = ("insufficient_credit", "credit", "balance", "quota")


def search_query(
    gpu: VastGpu, want: GpuRequest, capacity: Capacity, countries: tuple[str, ...], options: VastOptions
) -> dict[str, Any]:
    """The JSON query the official CLI sends to ``POST /api/v0/bundles/``."""
    query: dict[str, Any] = {
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "external": {"eq": False},
        "gpu_name": {"eq": gpu.name},
        "num_gpus": {"eq": want.count},
        "reliability2": {"gte": options.min_reliability},
        "order": [["dph_total", "asc"]],
        "type": "on-demand" if capacity is Capacity.ON_DEMAND else "bid",
        "limit": options.max_offers,
        "allocated_storage": options.disk_gb,
    }
    if options.verified_only:
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


def offer_from(
    row: Any, gpu: str, vast_gpu: VastGpu, want: GpuRequest, capacity: Capacity, *, provider: str
) -> Offer | None:
    """Our offer from one search row (one machine), or None when the row is not what was asked."""
    if not isinstance(row, Mapping) or row.get("id") is None:
        return None
    if not vast_gpu.matches(row.get("gpu_name"), row.get("gpu_ram")) or row.get("num_gpus") != want.count:
        return None  # the search filters this already; a row that slips through is not what was asked
    price = as_number(row.get("dph_total"))
    if capacity is Capacity.SPOT:
        price = as_number(row.get("min_bid")) or price
    if price is None or price <= 0:
        return None
    return Offer(
        provider=provider,
        offer_id=str(row["id"]),
        gpu=gpu,
        gpu_count=want.count,
        region=country(row.get("geolocation")) or "unknown",
        on_demand_per_hour=round(price, 4) if capacity is Capacity.ON_DEMAND else None,
        spot_per_hour=round(price, 4) if capacity is Capacity.SPOT else None,
        available=row.get("rentable") is not False and row.get("rented") is not True,
        available_count=1,  # an offer is one machine
    )


def instance_view(row: Mapping[str, Any], *, provider: str) -> ProviderInstance:
    """Our view of one instance row."""
    env = env_map(row.get("extra_env"))
    label = row.get("label") if isinstance(row.get("label"), str) else None
    key = key_if_marked(label, env or None)  # Vast shows no env for some rows: then the label alone decides
    capacity = capacity_of(env.get(CAPACITY_ENV), row.get("is_bid"))
    status, raw = instance_status(row, capacity)
    return ProviderInstance(
        provider=provider,
        provider_id=str(row["id"]),
        key=key,
        status=status,
        raw_status=raw,
        gpu=next((c for c, g in GPUS.items() if g.matches(row.get("gpu_name"), row.get("gpu_ram"))), None),
        gpu_count=row.get("num_gpus") if isinstance(row.get("num_gpus"), int) else None,
        region=country(row.get("geolocation")),
        capacity=capacity,
        price_per_hour=as_number(row.get("dph_total")),
        address=instance_address(row, env) if status is InstanceStatus.RUNNING else None,
        created_at=as_number(row.get("start_date")),
    )


def instance_status(row: Mapping[str, Any], capacity: Capacity | None) -> tuple[InstanceStatus, str]:
    actual, intended = as_text(row.get("actual_status")).lower(), as_text(row.get("intended_status")).lower()
    cur, note = as_text(row.get("cur_state")).lower(), as_text(row.get("status_msg")).lower()
    raw = "/".join(filter(None, (actual or "null", intended, cur)))
    if cur == "unloaded" or actual in ("destroyed", "deleted"):
        return InstanceStatus.TERMINATED, raw  # released on destroy
    if intended == "stopped" and actual in ("stopped", "exited", ""):
        return InstanceStatus.STOPPED, raw  # stopped on request (ours or anyone's): disk kept, no GPU
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
        # stopped while asked to run (not by a stop: that sets intended "stopped"): not documented, so
        # neither gone nor serving. A start waiting for the machine's GPUs shows "scheduling" (PENDING).
        return InstanceStatus.UNKNOWN, raw
    return map_status(actual, STATUS), raw


def instance_address(row: Mapping[str, Any], env: Mapping[str, Any]) -> str | None:
    ip = row.get("public_ipaddr")
    ports = row.get("ports")
    if not isinstance(ip, str) or not ip.strip() or not isinstance(ports, Mapping):
        return None
    declared = [k.split()[1].split(":")[0] for k in env if k.startswith("-p ") and len(k.split()) == 2]
    for private in declared or [k.split("/")[0] for k in ports]:
        for binding in as_list(ports.get(f"{private}/tcp")):
            host_port = binding.get("HostPort") if isinstance(binding, Mapping) else None
            if isinstance(host_port, str | int) and str(host_port).isdigit():
                return f"{ip.strip()}:{host_port}"
    return None


def countries(regions: tuple[str, ...], provider: str) -> tuple[str, ...]:
    bad = [r for r in regions if not COUNTRY.match(r)]
    if bad:
        raise InvalidRequest(
            f"unknown Vast.ai region(s) {', '.join(bad)}: Vast.ai regions are two-letter country codes "
            "of the machine's geolocation (for example US, CA, SE, DE)",
            provider=provider,
        )
    return tuple(r.upper() for r in regions)


def country(geolocation: Any) -> str | None:
    """'Texas, US' -> 'US'; 'SE' -> 'SE'; anything else is kept as Vast wrote it."""
    if not isinstance(geolocation, str) or not geolocation.strip():
        return None
    last = geolocation.rsplit(",", 1)[-1].strip()
    return last.upper() if COUNTRY.match(last) else geolocation.strip()


def env_map(extra_env: Any) -> dict[str, Any]:
    """Vast shows the environment as [[key, value], ...]; accept an object too."""
    if isinstance(extra_env, Mapping):
        return {str(k): v for k, v in extra_env.items()}
    pairs: dict[str, Any] = {}
    for item in as_list(extra_env):
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
            pairs[item[0]] = item[1]
    return pairs
