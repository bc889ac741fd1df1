"""Lambda Cloud adapter (https://cloud.lambdalabs.com/api/v1, also cloud.lambda.ai). Translates only.

Instance types are named ``gpu_<count>x_<model>`` and priced per whole instance in
``price_cents_per_hour``; ``GET /instance-types`` also says which regions have capacity right now
(``regions_with_capacity_available``), which becomes ``Offer.available``. Instances are named with
our key (names are at most 64 characters; keys at most 63). There is no spot market.

Lambda documents a request rate of about one per second and one launch per 12 seconds. Both are
respected up front by pacers on the injected clock: a launch waits its turn instead of failing.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from scalectl.clocks import Clock
from scalectl.providers.base import (
    BootstrapForm,
    Capacity,
    GpuRequest,
    InstanceStatus,
    LaunchSpec,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from scalectl.providers.create_outcome import send_create, unreadable
from scalectl.providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
)
from scalectl.providers.http import ApiClient, ApiKey, HttpFailure, Pacer, RetryPolicy, classify_status, shared_status
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.status import map_status
from scalectl.providers.stop_start import refuse
from scalectl.providers.tagging import key_from_name, validate_key
from scalectl.serving.bootstrap.cloud_init import CloudConfig
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu
from scalectl.sizing.server import ServerDescription

DEFAULT_BASE_URL = "https://cloud.lambdalabs.com/api/v1"
LAUNCH_PATH = "/instance-operations/launch"
MAX_NAME = 64
MAX_USER_DATA = 1_000_000  # "cannot exceed 1MB"
LAUNCH_INTERVAL = 12.0  # documented: one launch per 12 s
REQUEST_INTERVAL = 1.0  # documented: about one request per second

STATUS_TABLE: dict[str, InstanceStatus] = {
    "booting": InstanceStatus.PENDING,
    "active": InstanceStatus.RUNNING,
    "unhealthy": InstanceStatus.UNKNOWN,  # up but failing Lambda's checks: neither healthy nor gone
    "terminating": InstanceStatus.STOPPING,
    "terminated": InstanceStatus.TERMINATED,
    "preempted": InstanceStatus.PREEMPTED,
}

# Model part of ``gpu_<n>x_<model>`` -> catalogue name. Lambda's bare "a100" is the 40 GB PCIe card and
# "a100_sxm4" the 40 GB SXM4 one; the 80 GB parts say so. Models not listed give no offers.
LAMBDA_GPUS: dict[str, str] = {
    "h100_sxm5": "H100-SXM5-80GB",
    "h100_pcie": "H100-PCIe-80GB",
    "a100": "A100-40GB-PCIe",
    "a100_pcie": "A100-40GB-PCIe",
    "a100_sxm4": "A100-40GB-SXM4",
    "a100_80gb_sxm4": "A100-80GB-SXM4",
    "a100_80gb_pcie": "A100-80GB-PCIe",
    "h200_sxm5": "H200-141GB",
    "b200_sxm6": "B200-192GB",
}

# Region codes in Lambda's public API (used to name the valid ones in errors); live responses add to it.
KNOWN_REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-east-3",
    "us-west-1",
    "us-west-2",
    "us-west-3",
    "us-south-1",
    "us-south-2",
    "us-south-3",
    "us-midwest-1",
    "europe-central-1",
    "asia-south-1",
    "asia-northeast-1",
    "asia-northeast-2",
    "me-west-1",
)

_TYPE_NAME = re.compile(r"^gpu_(\d+)x_([a-z0-9_]+)$")


@dataclass(frozen=True, slots=True)
class LambdaOptions:
    ssh_key_name: str | None = None  # a key registered with Lambda; the API needs exactly one per launch
    regions: tuple[str, ...] = KNOWN_REGIONS
    server_port: int = 8000
    timeout: float = 30.0
    max_attempts: int = 4
    max_wait: float = 30.0
    launch_interval: float = LAUNCH_INTERVAL  # 0 turns pacing off (the 429 path still recovers)
    request_interval: float = REQUEST_INTERVAL

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> LambdaOptions:
        known = {f.name for f in fields(cls)}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"lambda provider: unknown options {sorted(unknown)}; known: {sorted(known)}")
        values = dict(options)
        if "regions" in values:
            values["regions"] = tuple(values["regions"])
        return cls(**values)


def parse_instance_type(name: str) -> tuple[str, int] | None:
    """("gpu_8x_a100_80gb_sxm4") -> ("A100-80GB-SXM4", 8); None for names or GPUs we do not know."""
    match = _TYPE_NAME.match(name)
    if not match:
        return None
    gpu = LAMBDA_GPUS.get(match.group(2))
    return (gpu, int(match.group(1))) if gpu else None


def _error_fields(body: Any) -> tuple[str, str]:
    """(code, "message (suggestion)") from Lambda's ``{"error": {"code", "message", "suggestion"}}``."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "", str(body or "no error message")[:300]
    message = str(error.get("message") or "no error message")
    if error.get("suggestion"):
        message = f"{message} ({error['suggestion']})"
    return str(error.get("code") or ""), message


class LambdaProvider:
    """Lambda Cloud on-demand instances."""

    # GET /instances answers with every instance of the account at once; no spot, no interruptions.
    # Lambda documents no listing consistency; 30 s, as for Spheron (a lost launch is looked up, not repeated).
    # Boot paths: Lambda has no stop (its API has launch, restart and terminate; docs.lambda.ai: instances
    # cannot be paused, only terminated) but persistent filesystems that outlive instances.
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.CLOUD_INIT,
        listing_lag=30.0,
        stop_start=False,
        persistent_volumes=True,
        custom_images=False,  # the base images Lambda offers, no image of ours
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> CloudConfig:
        return CloudConfig.of(server)

    def __init__(self, config: ProviderConfig, clock: Clock):
        self.name = config.name
        self.clock = clock
        self.options = LambdaOptions.from_mapping(dict(config.options))
        self._key = ApiKey(config)
        self._key.load()  # a missing key fails the build, naming where to put it
        self._launch_pacer = Pacer(clock, self.options.launch_interval)
        self.api = ApiClient(
            provider=self.name,
            base_url=config.base_url or DEFAULT_BASE_URL,
            key=self._key,
            clock=clock,
            map_error=self._map_error,
            timeout=self.options.timeout,
            retry=RetryPolicy(
                max_attempts=self.options.max_attempts,
                max_wait=self.options.max_wait,
                max_retry_after=self.options.max_wait,
            ),
            pacer=Pacer(clock, self.options.request_interval) if self.options.request_interval > 0 else None,
        )

    def __repr__(self) -> str:
        return f"LambdaProvider(name={self.name!r})"

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> builtins.list[Offer]:
        try:
            gpu = normalize_gpu(want.gpu)
        except UnknownGpu:
            return []
        if want.capacity is Capacity.SPOT:
            return []  # Lambda sells no spot capacity
        body = await self.api.request("GET", "/instance-types")
        types = body.get("data") if isinstance(body, dict) else None
        types = types if isinstance(types, dict) else {}
        live_regions = {
            str(r.get("name"))
            for entry in types.values()
            if isinstance(entry, dict)
            for r in entry.get("regions_with_capacity_available") or []
            if isinstance(r, dict) and r.get("name")
        }
        known = set(self.options.regions) | live_regions
        unknown = [r for r in want.regions if r not in known]
        if unknown:
            raise InvalidRequest(
                f"unknown region(s) {unknown}; Lambda regions: {', '.join(sorted(known))}", provider=self.name
            )
        offers = []
        for type_name, entry in sorted(types.items()):
            if not isinstance(entry, dict) or parse_instance_type(type_name) != (gpu, want.count):
                continue
            info = entry.get("instance_type") if isinstance(entry.get("instance_type"), dict) else {}
            cents = info.get("price_cents_per_hour") if info else None
            if not isinstance(cents, int | float) or cents <= 0:
                continue
            with_capacity = [
                str(r.get("name")) for r in entry.get("regions_with_capacity_available") or [] if isinstance(r, dict)
            ]
            for region in want.regions or tuple(with_capacity):
                offers.append(
                    Offer(
                        provider=self.name,
                        offer_id=type_name,
                        gpu=gpu,
                        gpu_count=want.count,
                        region=region,
                        on_demand_per_hour=round(cents / 100.0, 4),
                        spot_per_hour=None,
                        available=region in with_capacity,
                    )
                )
        return offers

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        validate_key(spec.key)
        offer = spec.offer
        if spec.capacity is Capacity.SPOT:
            raise InvalidRequest("Lambda Cloud has no spot capacity; use on-demand", provider=self.name)
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        if parse_instance_type(offer.offer_id) is None:
            raise InvalidRequest(f"{offer.offer_id!r} is not a Lambda GPU instance type we know", provider=self.name)
        if not self.options.ssh_key_name:
            raise InvalidRequest(
                "Lambda needs exactly one SSH key per launch: set options.ssh_key_name to a key registered "
                "in the Lambda console",
                provider=self.name,
            )
        if len(spec.key) > MAX_NAME:
            raise InvalidRequest(f"instance name {spec.key!r} is longer than {MAX_NAME}", provider=self.name)
        user_data = self.render_launch(spec.server).user_data() if spec.server is not None else None
        if user_data and len(user_data.encode()) > MAX_USER_DATA:
            raise InvalidRequest("the rendered cloud-init user data exceeds Lambda's 1 MB limit", provider=self.name)
        body: dict[str, Any] = {
            "region_name": offer.region,
            "instance_type_name": offer.offer_id,
            "ssh_key_names": [self.options.ssh_key_name],
            "name": spec.key,
        }
        if user_data:
            body["user_data"] = user_data
        # Lookup-then-launch is the retried unit: after a lost response the instance may exist already.
        return await self.api.retrying(lambda: self._create_once(spec, body))

    async def get(self, provider_id: str) -> ProviderInstance:
        body = await self.api.request("GET", f"/instances/{provider_id}")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        return self._view(data, key_prefix="")

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return [i for i in await self._all() if (i.key is not None and i.key.startswith(key_prefix))]

    async def delete(self, provider_id: str) -> None:
        try:
            await self.api.request("POST", "/instance-operations/terminate", json={"instance_ids": [provider_id]})
        except InstanceNotFound:
            return  # gone already: success
        except InvalidRequest:
            # Terminating something already terminating/terminated may be refused; gone is success.
            try:
                current = await self.get(provider_id)
            except InstanceNotFound:
                return
            if current.status in (InstanceStatus.TERMINATED, InstanceStatus.STOPPING) or current.status.is_gone:
                return
            raise

    async def stop(self, provider_id: str) -> None:
        raise refuse("stop", provider=self.name, why="Lambda Cloud instances cannot be stopped, only terminated")

    async def start(self, provider_id: str) -> None:
        raise refuse("start", provider=self.name, why="Lambda Cloud instances cannot be stopped, only terminated")

    async def aclose(self) -> None:
        await self.api.aclose()

    # ---- internals -------------------------------------------------------------------------------
    async def _all(self, *, retry: bool = True) -> builtins.list[ProviderInstance]:
        body = await self.api.request("GET", "/instances", retry=retry)
        rows = body.get("data") if isinstance(body, dict) else None
        return [self._view(d, key_prefix="") for d in rows or [] if isinstance(d, dict)]

    async def _create_once(self, spec: LaunchSpec, body: dict[str, Any]) -> ProviderInstance:
        existing = [i for i in await self._all(retry=False) if i.key == spec.key]
        if existing:
            return existing[0]
        lag = self.capabilities.listing_lag
        created = await send_create(
            lambda: self.api.request("POST", LAUNCH_PATH, json=body, retry=False, pacer=self._launch_pacer),
            provider=self.name,
            clock=self.clock,
            listing_lag=lag,
        )
        data = created.get("data") if isinstance(created, dict) else None
        ids = data.get("instance_ids") if isinstance(data, dict) else None
        if not ids:
            raise unreadable(f"POST {LAUNCH_PATH}", provider=self.name, clock=self.clock, listing_lag=lag)
        return ProviderInstance(
            provider=self.name,
            provider_id=str(ids[0]),
            key=spec.key,
            status=InstanceStatus.PENDING,
            raw_status="booting",
            gpu=spec.offer.gpu,
            gpu_count=spec.offer.gpu_count,
            region=spec.offer.region,
            capacity=Capacity.ON_DEMAND,
            price_per_hour=spec.offer.on_demand_per_hour,
            created_at=self.clock.now(),
        )

    def _view(self, d: dict[str, Any], *, key_prefix: str) -> ProviderInstance:
        raw_status = str(d.get("status") or "")
        status = map_status(raw_status, STATUS_TABLE)
        itype = d.get("instance_type") if isinstance(d.get("instance_type"), dict) else {}
        parsed = parse_instance_type(str(itype.get("name") or "")) if itype else None
        cents = itype.get("price_cents_per_hour") if itype else None
        region = d.get("region")
        ip = d.get("ip")
        return ProviderInstance(
            provider=self.name,
            provider_id=str(d.get("id") or ""),
            key=key_from_name(d.get("name") if isinstance(d.get("name"), str) else None, key_prefix),
            status=status,
            raw_status=raw_status,
            gpu=parsed[0] if parsed else None,
            gpu_count=parsed[1] if parsed else None,
            region=str(region.get("name")) if isinstance(region, dict) and region.get("name") else None,
            capacity=Capacity.ON_DEMAND,
            price_per_hour=round(cents / 100.0, 4) if isinstance(cents, int | float) else None,
            address=f"{ip}:{self.options.server_port}" if ip and status is InstanceStatus.RUNNING else None,
        )

    def _map_error(self, failure: HttpFailure) -> ProviderError:
        code, message = _error_fields(failure.body)
        text = f"{failure.where}: {code + ': ' if code else ''}{message}"
        if code == "global/invalid-api-key" or code == "global/account-inactive":
            return AuthFailed(f"{text}; check {self._key.hint}", provider=self.name)
        if code == "global/object-does-not-exist":
            return InstanceNotFound(text, provider=self.name)
        if code == "instance-operations/launch/insufficient-capacity":
            return InsufficientCapacity(text, provider=self.name)
        if "quota" in code:
            return QuotaExceeded(text, provider=self.name)
        # Lambda sends no Retry-After; its documented spacing is the honest hint.
        is_launch = failure.path.endswith(LAUNCH_PATH)
        hint = (self.options.launch_interval or LAUNCH_INTERVAL) if is_launch else REQUEST_INTERVAL
        if shared_status(failure.status) or failure.status == 404:
            return classify_status(failure, self.name, message, credential_hint=self._key.hint, rate_limit_wait=hint)
        return InvalidRequest(f"{text} (HTTP {failure.status})", provider=self.name)
