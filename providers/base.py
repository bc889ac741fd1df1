"""The provider interface and the typed values that cross it.

Adapters only translate between these values and a cloud's API. They never sleep in loops, never
decide policy, and tag every instance with our idempotency key so ``list`` finds it after a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable


class Capacity(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"


class InstanceStatus(StrEnum):
    """Provider-side status, normalised. Mapping tables must land on UNKNOWN for anything unexpected."""

    PENDING = "pending"  # accepted, being created or booting
    RUNNING = "running"  # the machine is up (the server on it may still be loading)
    STOPPING = "stopping"
    TERMINATED = "terminated"  # gone at our request
    PREEMPTED = "preempted"  # taken back by the provider (spot interruption, host failure)
    FAILED = "failed"  # the provider gave up creating it
    UNKNOWN = "unknown"

    @property
    def is_gone(self) -> bool:
        return self in (InstanceStatus.TERMINATED, InstanceStatus.PREEMPTED, InstanceStatus.FAILED)


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a tier needs: a GPU type (catalogue name like "H100-SXM5-80GB"), how many, which capacity."""

    gpu: str
    count: int = 1
    capacity: Capacity | None = None  # None: both on-demand and spot offers
    regions: tuple[str, ...] = ()  # empty: any region


@dataclass(frozen=True, slots=True)
class Offer:
    provider: str
    offer_id: str
    gpu: str
    gpu_count: int
    region: str
    on_demand_per_hour: float | None  # $ per hour for the whole offer (all its GPUs); None: not sold
    spot_per_hour: float | None
    available: bool = True
    available_count: int | None = None  # machines free right now, when the provider says

    def price(self, capacity: Capacity) -> float | None:
        return self.spot_per_hour if capacity is Capacity.SPOT else self.on_demand_per_hour


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """How the machine starts its server. Rendered once from one server description (sizing/bootstrap).

    VM and bare-metal clouds take ``user_data`` (cloud-init); container clouds take ``image`` + ``args``
    + ``env``; SSH-only clouds run ``ssh_script`` after boot.
    """

    user_data: str | None = None
    image: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = (8000,)
    ssh_script: str | None = None


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    key: str  # our idempotency key; the adapter names or tags the instance with it
    tier: str
    offer: Offer
    capacity: Capacity
    bootstrap: Bootstrap = field(default_factory=Bootstrap)
    tags: Mapping[str, str] = field(default_factory=dict)
    bid_per_hour: float | None = None  # for bid-based spot markets (Vast.ai, RunPod interruptible)


@dataclass(frozen=True, slots=True)
class ProviderInstance:
    provider: str
    provider_id: str
    key: str | None  # our idempotency key recovered from name/tags; None if not ours
    status: InstanceStatus
    raw_status: str = ""
    gpu: str | None = None
    gpu_count: int | None = None
    region: str | None = None
    capacity: Capacity | None = None
    price_per_hour: float | None = None
    address: str | None = None  # "host:port" of the server endpoint once known
    created_at: float | None = None  # epoch seconds, when the provider says
    interruption_notice_at: float | None = None  # set when the provider warned of a preemption


@runtime_checkable
class Provider(Protocol):
    """Six methods, like Karpenter's CloudProvider. All async; ``create`` returns fast, never waits."""

    name: str

    async def offers(self, want: GpuRequest) -> list[Offer]: ...

    async def create(self, spec: LaunchSpec) -> ProviderInstance: ...

    async def get(self, provider_id: str) -> ProviderInstance: ...  # raises InstanceNotFound

    async def list(self, key_prefix: str) -> list[ProviderInstance]: ...  # ours only

    async def delete(self, provider_id: str) -> None: ...  # idempotent: gone is success

    async def aclose(self) -> None: ...
