"""The provider interface and the typed values that cross it.

Adapters only translate between these values and a cloud's API. They never sleep in loops, never
decide policy, and tag every instance with our idempotency key so ``list`` finds it after a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Protocol, runtime_checkable

from scalectl.sizing.server import ServerDescription


class Capacity(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"


class InstanceStatus(StrEnum):
    """Provider-side status, normalised. Mapping tables must land on UNKNOWN for anything unexpected."""

    PENDING = "pending"  # accepted, being created or booting
    RUNNING = "running"  # the machine is up (the server on it may still be loading)
    STOPPING = "stopping"
    STOPPED = "stopped"  # halted at our (or someone's) request: GPU released, disk kept, may be started again
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
class LaunchSpec:
    key: str  # our idempotency key; the adapter names or tags the instance with it
    tier: str
    offer: Offer
    capacity: Capacity
    server: ServerDescription | None = None  # what the machine serves; the adapter renders its own form of it
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


class BootstrapForm(StrEnum):
    """What a provider's machines take at launch to start the server (rendered by serving.bootstrap)."""

    CLOUD_INIT = "cloud-init"  # VMs and bare metal: cloud-init user-data (or the cloud's structured form of it)
    CONTAINER = "container"  # container clouds: image + args + env + ports
    SSH_SCRIPT = "ssh-script"  # machines reachable only over SSH: one bash script run after boot
    STANDIN = "standin"  # local processes: the vLLM stand-in's command-line arguments
    NONE = "none"  # nothing boots: the provider's "running" is the whole story (simulated)


class NoticeDelivery(StrEnum):
    """How a spot interruption notice reaches us before the machine goes."""

    PUSH = "push"  # the cloud sends an event to our webhook (AWS EventBridge)
    POLL = "poll"  # get/list carry ``interruption_notice_at``
    NONE = "none"  # no notice: an interruption is seen only as the instance ending (PREEMPTED)


class ListFilter(StrEnum):
    """Where ``list(key_prefix)`` narrows to our instances."""

    NAME_PREFIX = "name-prefix"  # the provider filters by our key prefix (a tag or name filter)
    CLIENT = "client"  # the adapter fetches every instance of the account and filters them itself


@dataclass(frozen=True, slots=True)
class LocalState:
    """State an adapter keeps on the daemon's own machine; the daemon places it under its data dir."""

    option: str  # the adapter option naming the file or directory ("state_path", "state_dir")
    implicit_name: str  # its name for the implicit provider of this type (a tier naming "simulated", "local")
    configured_name: str | None = None  # for a configured entry, "{name}" is the entry; None: the adapter's default

    def default_for(self, name: str, *, implicit: bool) -> str | None:
        """The file or directory name under the data dir, or None to leave the adapter's own default."""
        if implicit:
            return self.implicit_name
        return self.configured_name.format(name=name) if self.configured_name is not None else None


@dataclass(frozen=True, slots=True)
class ProviderCapabilities:
    """What an adapter is, declared once on its class; the controller asks this, never the provider's type."""

    bootstrap: BootstrapForm
    running_means_ready: bool = False  # True: the provider's "running" is serving, no readiness probe needed
    spot: bool = False  # sells interruptible capacity (spot, interruptible pods, bids)
    interruption_notices: NoticeDelivery = NoticeDelivery.NONE
    list_filter: ListFilter = ListFilter.CLIENT
    list_page_size: int | None = None  # instances we ask per list page; None: the provider decides (or no paging)
    list_max_pages: int | None = None  # pages one list walks at most; None: no bound
    # seconds between listings while every instance of ours there is ready (nothing to adopt, boot or
    # drain): for providers with a tight request budget. None: list every tick.
    idle_list_every: float | None = None
    local_state: LocalState | None = None  # state kept on the daemon's machine (simulated cloud, local processes)
    # Seconds a new instance may take to show in ``list`` (and in the look-up by key a create does) after
    # the provider made it. A create whose outcome is unknown is not sent again for that key before this
    # has passed, and a second instance under a live row's key is deleted only after longer than this.
    listing_lag: float = 0.0
    # Boot paths faster than a fresh create (docs/providers/README.md, "Boot paths", gives each cloud's
    # source). ``stop_start``: ``stop``/``start`` keep the machine and its disk; False: they raise
    # ``NotSupported`` and nothing is sent.
    stop_start: bool = False
    billed_while_stopped: str = ""  # what the provider bills while stopped ("" where nothing can be stopped)
    resume_may_fail_no_capacity: bool = False  # a start can find the GPU taken meanwhile
    persistent_volumes: bool = False  # storage that outlives a deleted machine (weights cached across creates)
    custom_images: bool = False  # boots from an image of ours (weights baked in), not only the cloud's own

    @property
    def launches_server(self) -> bool:
        """Whether a server of ours runs on the machine (something to probe, scrape and drain)."""
        return self.bootstrap is not BootstrapForm.NONE


@runtime_checkable
class Provider(Protocol):
    """Six methods, like Karpenter's CloudProvider, plus stop/start. All async; ``create`` returns fast,
    never waits; so do ``stop`` and ``start`` (the machine gets there later, as ``get`` shows).

    ``capabilities`` is a class-level declaration of what the adapter is. ``render_launch`` (pure) renders a
    server description in the adapter's declared bootstrap form; ``create`` sends what it renders.
    """

    name: str
    capabilities: ClassVar[ProviderCapabilities]

    @staticmethod
    def render_launch(server: ServerDescription) -> object: ...

    async def offers(self, want: GpuRequest) -> list[Offer]: ...

    async def create(self, spec: LaunchSpec) -> ProviderInstance: ...

    async def get(self, provider_id: str) -> ProviderInstance: ...  # raises InstanceNotFound

    async def list(self, key_prefix: str) -> list[ProviderInstance]: ...  # ours only

    async def delete(self, provider_id: str) -> None: ...  # idempotent: gone is success

    # Idempotent: "already stopped" (or stopping) is success for stop, "already running" (or starting) for
    # start. A start refused because the GPU was taken meanwhile raises InsufficientCapacity. Adapters
    # declaring ``stop_start=False`` raise NotSupported without a request.
    async def stop(self, provider_id: str) -> None: ...

    async def start(self, provider_id: str) -> None: ...

    async def aclose(self) -> None: ...
