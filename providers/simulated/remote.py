"""``type: simulated-remote``: the simulated cloud served over HTTP (``scalectl.providers.simulated.server``), so that
several daemon processes (high availability, sharding) create, list and delete in one shared cloud.

The adapter only translates: the cloud's state, clock and capacity live in the server. This module also
holds the wire format both sides use: offers, launches, instances and errors as plain JSON. Offers and
instances travel without a provider name; each side fills in its own (the server's cloud checks that an
offer is its own, the daemon that it is this provider's).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any, ClassVar, TypeVar
from urllib.parse import quote

from scalectl.clocks import Clock
from scalectl.providers.base import (
    Capacity,
    GpuRequest,
    InstanceStatus,
    LaunchSpec,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from scalectl.providers.errors import (
    AuthFailed,
    DeleteDeferred,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ListingIncomplete,
    NotSupported,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    Transient,
)
from scalectl.providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy, classify_status
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.secrets import Secret
from scalectl.providers.simulated.cloud import SimulatedCloud
from scalectl.sizing.server import ServerDescription

# ---- the wire format -----------------------------------------------------------------------------------

# error kind in the JSON body -> (exception, HTTP status). The body's kind decides the exception; the status
# is the conventional one, so a proxy's page without a kind still maps sensibly (``classify_status``).
ERRORS: dict[str, tuple[type[ProviderError], int]] = {
    "instance-not-found": (InstanceNotFound, 404),
    "insufficient-capacity": (InsufficientCapacity, 409),
    "invalid-request": (InvalidRequest, 400),
    "quota-exceeded": (QuotaExceeded, 402),
    "auth-failed": (AuthFailed, 401),
    "rate-limited": (RateLimited, 429),
    "delete-deferred": (DeleteDeferred, 423),
    "not-supported": (NotSupported, 405),
    "transient": (Transient, 503),
    "listing-incomplete": (ListingIncomplete, 500),
    "provider-error": (ProviderError, 500),
}
_KIND_OF: dict[type[ProviderError], str] = {cls: kind for kind, (cls, _) in ERRORS.items()}
_STATUS = {s.value: s for s in InstanceStatus}
T = TypeVar("T")
_CAPACITY = {c.value: c for c in Capacity}


def error_kind(exc: ProviderError) -> tuple[str, int]:
    """(kind, HTTP status) for a cloud error: its own class's, else the nearest base class's."""
    for cls in type(exc).__mro__:
        kind = _KIND_OF.get(cls)
        if kind is not None:
            return kind, ERRORS[kind][1]
    return "provider-error", 500  # pragma: no cover - every ProviderError has ProviderError in its MRO


def error_message(exc: ProviderError) -> str:
    """The error's text without the ``provider:`` prefix (the client adds its own provider name)."""
    return str(exc.args[0]) if exc.args else type(exc).__name__


def offer_to_json(offer: Offer) -> dict[str, Any]:
    return {
        "offer_id": offer.offer_id,
        "gpu": offer.gpu,
        "gpu_count": offer.gpu_count,
        "region": offer.region,
        "on_demand_per_hour": offer.on_demand_per_hour,
        "spot_per_hour": offer.spot_per_hour,
        "available": offer.available,
        "available_count": offer.available_count,
    }


def offer_from_json(raw: Mapping[str, Any], provider: str) -> Offer:
    return Offer(
        provider=provider,
        offer_id=str(raw["offer_id"]),
        gpu=str(raw["gpu"]),
        gpu_count=int(raw["gpu_count"]),
        region=str(raw["region"]),
        on_demand_per_hour=_float_or_none(raw.get("on_demand_per_hour")),
        spot_per_hour=_float_or_none(raw.get("spot_per_hour")),
        available=bool(raw.get("available", True)),
        available_count=_int_or_none(raw.get("available_count")),
    )


def request_to_json(want: GpuRequest) -> dict[str, Any]:
    return {
        "gpu": want.gpu,
        "count": want.count,
        "capacity": want.capacity.value if want.capacity is not None else None,
        "regions": list(want.regions),
    }


def request_from_json(raw: Mapping[str, Any]) -> GpuRequest:
    capacity = raw.get("capacity")
    return GpuRequest(
        gpu=str(raw["gpu"]),
        count=int(raw.get("count", 1)),
        capacity=Capacity(capacity) if capacity is not None else None,
        regions=tuple(str(r) for r in raw.get("regions") or ()),
    )


def launch_to_json(spec: LaunchSpec) -> dict[str, Any]:
    """The launch without its server description: nothing boots in a simulated cloud."""
    return {
        "key": spec.key,
        "tier": spec.tier,
        "offer": offer_to_json(spec.offer),
        "capacity": spec.capacity.value,
        "tags": dict(spec.tags),
        "bid_per_hour": spec.bid_per_hour,
    }


def launch_from_json(raw: Mapping[str, Any], provider: str) -> LaunchSpec:
    tags = raw.get("tags") or {}
    if not isinstance(tags, Mapping):
        raise ValueError("tags must be an object of strings")
    return LaunchSpec(
        key=str(raw["key"]),
        tier=str(raw["tier"]),
        offer=offer_from_json(raw["offer"], provider),
        capacity=Capacity(raw["capacity"]),
        tags={str(k): str(v) for k, v in tags.items()},
        bid_per_hour=_float_or_none(raw.get("bid_per_hour")),
    )


def instance_to_json(inst: ProviderInstance) -> dict[str, Any]:
    """Plain fields only: a listing of tens of thousands is converted in a few milliseconds per thousand."""
    return {
        "provider_id": inst.provider_id,
        "key": inst.key,
        "status": inst.status.value,
        "raw_status": inst.raw_status,
        "gpu": inst.gpu,
        "gpu_count": inst.gpu_count,
        "region": inst.region,
        "capacity": inst.capacity.value if inst.capacity is not None else None,
        "price_per_hour": inst.price_per_hour,
        "address": inst.address,
        "created_at": inst.created_at,
        "interruption_notice_at": inst.interruption_notice_at,
    }


def instance_from_json(raw: Mapping[str, Any], provider: str) -> ProviderInstance:
    capacity = raw.get("capacity")
    return ProviderInstance(
        provider=provider,
        provider_id=str(raw["provider_id"]),
        key=raw.get("key"),
        status=_STATUS.get(raw.get("status") or "", InstanceStatus.UNKNOWN),
        raw_status=raw.get("raw_status") or "",
        gpu=raw.get("gpu"),
        gpu_count=raw.get("gpu_count"),
        region=raw.get("region"),
        capacity=_CAPACITY[capacity] if capacity is not None else None,
        price_per_hour=raw.get("price_per_hour"),
        address=raw.get("address"),
        created_at=raw.get("created_at"),
        interruption_notice_at=raw.get("interruption_notice_at"),
    )


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


# ---- the adapter ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RemoteOptions:
    timeout: float = 30.0  # seconds per request (a listing of 20,000 instances takes well under one)
    max_attempts: int = 4  # transient failures and rate limits are retried; create is idempotent by key
    max_wait: float = 8.0

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RemoteOptions:
        known = {f.name for f in fields(cls)}
        unknown = set(options) - known
        if unknown:
            raise ValueError(
                f"simulated-remote provider: unknown options {sorted(unknown)}; known: {sorted(known)} "
                "(the simulated cloud's own options are given to its server on the command line)"
            )
        return cls(**options)


class _NoKey(ApiKey):
    """The simulated cloud's server asks for no credentials."""

    def load(self) -> Secret:
        return Secret("")


def _no_auth(_: Secret) -> Mapping[str, str]:
    return {}


class RemoteSimulatedCloud:
    """A simulated cloud shared by several daemons: the Provider protocol over the server's JSON API."""

    # What the simulated cloud is, except that its state lives in the server, not on the daemon's machine.
    capabilities: ClassVar[ProviderCapabilities] = replace(SimulatedCloud.capabilities, local_state=None)

    @staticmethod
    def render_launch(server: ServerDescription) -> None:
        return None  # no server to start

    def __init__(self, config: ProviderConfig, clock: Clock):
        if not config.base_url:
            raise ValueError(
                f"provider {config.name!r} (type simulated-remote) needs base_url: start the simulated cloud "
                "server (python -m providers.simulated.server --port 8300) and set base_url to the URL it "
                "prints, e.g. base_url: http://127.0.0.1:8300"
            )
        self.name = config.name
        self.clock = clock
        self.options = RemoteOptions.from_mapping(config.options)
        self.api = ApiClient(
            provider=self.name,
            base_url=config.base_url,
            key=_NoKey(config),
            auth_headers=_no_auth,
            map_error=self._map_error,
            clock=clock,
            timeout=self.options.timeout,
            retry=RetryPolicy(max_attempts=self.options.max_attempts, max_wait=self.options.max_wait),
        )

    def __repr__(self) -> str:
        return f"RemoteSimulatedCloud(name={self.name!r}, api={self.api!r})"

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> builtins.list[Offer]:
        body = await self.api.request("POST", "/offers", json=request_to_json(want))
        return self._decode_list(body, "POST /offers", partial(offer_from_json, provider=self.name), Transient)

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        if spec.offer.provider != self.name:
            raise InvalidRequest(f"offer {spec.offer.offer_id} belongs to {spec.offer.provider}", provider=self.name)
        # Retried on transient failures: the server returns the instance a key already has, never a second one.
        body = await self.api.request("POST", "/instances", json=launch_to_json(spec))
        return self._decode_instance(body, "POST /instances")

    async def get(self, provider_id: str) -> ProviderInstance:
        path = f"/instances/{quote(provider_id, safe='')}"
        return self._decode_instance(await self.api.request("GET", path), f"GET {path}")

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        body = await self.api.request("GET", "/instances", params={"prefix": key_prefix})
        decode = partial(instance_from_json, provider=self.name)
        return self._decode_list(body, "GET /instances", decode, ListingIncomplete)

    async def delete(self, provider_id: str) -> None:
        await self.api.request("DELETE", f"/instances/{quote(provider_id, safe='')}")  # gone already: 204 all the same

    async def stop(self, provider_id: str) -> None:
        await self.api.request("POST", f"/instances/{quote(provider_id, safe='')}/stop")  # stopped already: 204

    async def start(self, provider_id: str) -> None:
        await self.api.request("POST", f"/instances/{quote(provider_id, safe='')}/start")

    async def aclose(self) -> None:
        await self.api.aclose()

    # ---- internals -------------------------------------------------------------------------------
    def _map_error(self, failure: HttpFailure) -> ProviderError:
        body = failure.body if isinstance(failure.body, Mapping) else {}
        known = ERRORS.get(str(body.get("error")))
        message = failure.message("message")
        if known is None:  # not the server's own answer (a proxy, a crash): by status alone
            return classify_status(failure, self.name, message)
        cls = known[0]
        retry_after = _float_or_none(body.get("retry_after"))  # exact; the header is whole seconds
        if retry_after is None:
            retry_after = failure.retry_after
        return cls(f"{failure.where}: {message}", provider=self.name, retry_after=retry_after)

    def _decode_instance(self, body: Any, where: str) -> ProviderInstance:
        try:
            return instance_from_json(body, self.name)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Transient(f"{where}: unexpected answer ({type(exc).__name__}: {exc})", provider=self.name) from None

    def _decode_list(
        self, body: Any, where: str, decode: Callable[[Mapping[str, Any]], T], error: type[ProviderError]
    ) -> builtins.list[T]:
        """Every item or an ``error``: a listing that cannot be read whole is not a listing."""
        if not isinstance(body, builtins.list):
            raise error(f"{where}: the answer is not a list", provider=self.name)
        try:
            return [decode(raw) for raw in body]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise error(f"{where}: unexpected answer ({type(exc).__name__}: {exc})", provider=self.name) from None
