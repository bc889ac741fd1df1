"""AWS EC2 adapter: GPU instances through boto3 (the optional ``aws`` extra), one region per account entry.

boto3 is synchronous, so every call runs in a worker thread (``asyncio.to_thread``) and the daemon's
event loop never blocks. botocore's own retries are off: tenacity is the one, bounded, retry layer and
it sleeps on the injected clock. ``create`` passes our idempotency key as EC2's ``ClientToken``, so a
launch retried after a lost response can never start a second machine.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from clocks import Clock
from providers.aws_catalog import INSTANCE_TYPES, instance_types_for, on_demand_price
from providers.aws_errors import map_client_error
from providers.base import (
    BootstrapForm,
    Capacity,
    GpuRequest,
    InstanceStatus,
    LaunchSpec,
    ListFilter,
    NoticeDelivery,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from providers.errors import InstanceNotFound, InvalidRequest, Transient, is_retryable
from providers.registry import ProviderConfig
from providers.status import map_status
from providers.tagging import KEY_TAG, TIER_TAG, key_from_name, validate_key
from serving.bootstrap.cloud_init import CloudConfig
from sizing.server import ServerDescription

log = logging.getLogger(__name__)
T = TypeVar("T")

# The AWS Deep Learning Base AMI (NVIDIA driver, CUDA, EFA; Ubuntu 22.04), resolved by EC2 at launch.
DEFAULT_AMI_SSM_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
USER_DATA_LIMIT = 16 * 1024  # EC2 rejects user data above 16 KB (before base64)

_STATUS: dict[str, InstanceStatus] = {
    "pending": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "shutting-down": InstanceStatus.STOPPING,
    "stopping": InstanceStatus.STOPPING,
    "stopped": InstanceStatus.STOPPING,  # not serving, still holding its volume: on its way out for us
    "terminated": InstanceStatus.TERMINATED,
}
# StateReason.Code values that say *why* an instance went away.
_PREEMPTED_REASONS = frozenset({"Server.SpotInstanceTermination", "Server.SpotInstanceShutdown"})
_FAILED_REASONS = frozenset(
    {
        "Server.InsufficientInstanceCapacity",
        "Server.InternalError",
        "Client.InternalError",
        "Client.VolumeLimitExceeded",
        "Client.InvalidSnapshot.NotFound",
    }
)


class AwsOptions(BaseModel):
    """``options:`` of an ``type: aws`` provider block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    profile: str | None = None  # a named profile from ~/.aws; default: the standard credential chain
    subnet_id: str | None = None
    security_group_ids: tuple[str, ...] = ()
    key_name: str | None = None
    ami_id: str | None = None  # wins over ami_ssm_parameter
    ami_ssm_parameter: str = DEFAULT_AMI_SSM_PARAMETER
    iam_instance_profile: str | None = None  # a name, or an ARN
    root_volume_gb: int = Field(200, ge=8, le=16384)
    root_device_name: str = "/dev/sda1"  # the Ubuntu AMIs' root device
    availability_zone: str | None = None  # spot prices of this zone; launches there when no subnet is set
    on_demand_prices: dict[str, float] = Field(default_factory=dict)  # instance type -> $/hour overrides
    server_port: int = Field(8000, ge=1, le=65535)
    use_private_ip: bool = False
    max_attempts: int = Field(3, ge=1, le=10)  # tenacity attempts for retryable errors
    retry_wait_max: float = Field(20.0, gt=0)
    connect_timeout: float = Field(5.0, gt=0)
    read_timeout: float = Field(30.0, gt=0)
    # EC2 is eventually consistent: an instance just launched can be "not found" for a little while.
    consistency_grace: float = Field(120.0, ge=0)

    @classmethod
    def parse(cls, name: str, options: Mapping[str, Any]) -> AwsOptions:
        try:
            return cls.model_validate(dict(options))
        except ValidationError as exc:
            problems = "; ".join(
                f"options.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise InvalidRequest(f"provider {name!r} (aws): {problems}", provider=name) from None


def _require_boto3(name: str) -> None:
    try:
        import boto3  # noqa: F401
    except ImportError:
        raise InvalidRequest(
            "the aws provider needs boto3, which is an optional extra: pip install 'scalectl[aws]'", provider=name
        ) from None


class AwsEc2Provider:
    """EC2 on-demand and spot GPU instances, tagged with our key, launched with cloud-init user data."""

    list_page_size = 200  # describe_instances page size (MaxResults)
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.CLOUD_INIT,
        spot=True,
        interruption_notices=NoticeDelivery.PUSH,  # EventBridge's two-minute warning, posted to our webhook
        list_filter=ListFilter.NAME_PREFIX,  # a tag:scalectl-key wildcard filter
        list_page_size=list_page_size,
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> CloudConfig:
        return CloudConfig.of(server)

    def __init__(self, config: ProviderConfig, clock: Clock):
        self.name = config.name
        self.clock = clock
        self.options = AwsOptions.parse(config.name, config.options)
        self.region = self.options.region
        self._endpoint_url = config.base_url  # a local EC2 stand-in in tests; None = the real endpoint
        _require_boto3(config.name)
        self._client: Any = None
        self._client_lock = asyncio.Lock()
        self._launched: dict[str, float] = {}  # provider id -> clock.monotonic() of our run_instances

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> list[Offer]:
        if want.regions and self.region not in want.regions:
            return []
        types = instance_types_for(want.gpu, want.count)
        if not types:
            return []
        names = [t.name for t in types]
        offered = await self._call("describe_instance_type_offerings", lambda c: self._offered(c, names))
        spot: dict[str, float] = {}
        if want.capacity in (None, Capacity.SPOT):
            spot = await self._call("describe_spot_price_history", lambda c: self._spot_prices(c, names))
        offers: list[Offer] = []
        for itype in types:
            if want.capacity in (None, Capacity.ON_DEMAND):
                price = on_demand_price(itype.name, self.options.on_demand_prices)
                if price is not None:
                    offers.append(self._offer(itype.name, Capacity.ON_DEMAND, price, itype.name in offered))
            if itype.name in spot:
                offers.append(self._offer(itype.name, Capacity.SPOT, spot[itype.name], itype.name in offered))
        return offers

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        validate_key(spec.key)
        itype = self._instance_type_of(spec.offer)
        existing = await self._find_by_key(spec.key)
        if existing is not None:
            return existing
        params = self._run_params(spec, itype)
        reply = await self._call("run_instances", lambda c: c.run_instances(**params))
        raw = reply["Instances"][0]
        self._launched[raw["InstanceId"]] = self.clock.monotonic()
        return self._view(raw)

    async def get(self, provider_id: str) -> ProviderInstance:
        try:
            reply = await self._call("describe_instances", lambda c: c.describe_instances(InstanceIds=[provider_id]))
        except InstanceNotFound:
            if self._recently_launched(provider_id):
                raise Transient(
                    f"instance {provider_id} is not visible yet (EC2 is eventually consistent)", provider=self.name
                ) from None
            raise
        found = [i for r in reply.get("Reservations", []) for i in r.get("Instances", [])]
        if not found:
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        return self._view(found[0])

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        found = await self._call("describe_instances", lambda c: self._describe_tagged(c, f"{key_prefix}*"))
        views = [self._view(raw) for raw in found]
        return [v for v in views if key_from_name(v.key, key_prefix)]

    async def delete(self, provider_id: str) -> None:
        try:
            await self._call("terminate_instances", lambda c: c.terminate_instances(InstanceIds=[provider_id]))
        except InstanceNotFound:
            return  # already gone (or never existed): success
        self._launched.pop(provider_id, None)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)

    # ---- the one way to call EC2 -----------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The boto3 EC2 client once built (tests hook botocore events on it); None before first use."""
        return self._client

    async def ensure_client(self) -> Any:
        async with self._client_lock:
            if self._client is None:
                self._client = await asyncio.to_thread(self._build_client)
        return self._client

    def _build_client(self) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(
            region_name=self.region,
            retries={"total_max_attempts": 1, "mode": "standard"},  # tenacity is the only retry layer
            connect_timeout=self.options.connect_timeout,
            read_timeout=self.options.read_timeout,
            user_agent_appid="scalectl",
        )
        try:
            session = boto3.session.Session(profile_name=self.options.profile, region_name=self.region)
            return session.client("ec2", config=config, endpoint_url=self._endpoint_url)
        except Exception as exc:  # ProfileNotFound and friends, mapped without their chain
            raise map_client_error(exc, provider=self.name, operation="connect") from None

    async def _call(self, operation: str, fn: Callable[[Any], T]) -> T:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.options.max_attempts),
            wait=wait_random_exponential(multiplier=0.5, max=self.options.retry_wait_max),
            retry=retry_if_exception(is_retryable),
            sleep=self.clock.sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._once(operation, fn)
        raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover

    async def _once(self, operation: str, fn: Callable[[Any], T]) -> T:
        from botocore.exceptions import BotoCoreError, ClientError

        client = await self.ensure_client()
        try:
            return await asyncio.to_thread(fn, client)
        except (ClientError, BotoCoreError) as exc:
            error = map_client_error(exc, provider=self.name, operation=operation)
        log.info("ec2 %s failed: %s (retryable: %s)", operation, type(error).__name__, error.retryable)
        raise error

    # ---- calls run in the worker thread ----------------------------------------------------------
    def _describe_tagged(self, client: Any, pattern: str) -> builtins.list[dict[str, Any]]:
        pages = client.get_paginator("describe_instances").paginate(
            Filters=[{"Name": f"tag:{KEY_TAG}", "Values": [pattern]}],
            PaginationConfig={"PageSize": self.list_page_size},
        )
        return [i for page in pages for r in page.get("Reservations", []) for i in r.get("Instances", [])]

    def _offered(self, client: Any, names: builtins.list[str]) -> set[str]:
        zone = self.options.availability_zone
        reply = client.describe_instance_type_offerings(
            LocationType="availability-zone" if zone else "region",
            Filters=[
                {"Name": "location", "Values": [zone or self.region]},
                {"Name": "instance-type", "Values": names},
            ],
        )
        return {o["InstanceType"] for o in reply.get("InstanceTypeOfferings", [])}

    def _spot_prices(self, client: Any, names: builtins.list[str]) -> dict[str, float]:
        """The price in effect now per instance type: the latest entry per zone, then the cheapest zone
        (or the configured zone)."""
        now = datetime.fromtimestamp(self.clock.now(), tz=UTC)
        kwargs: dict[str, Any] = {"InstanceTypes": names, "ProductDescriptions": ["Linux/UNIX"], "StartTime": now}
        if self.options.availability_zone:
            kwargs["AvailabilityZone"] = self.options.availability_zone
        pages = client.get_paginator("describe_spot_price_history").paginate(**kwargs)
        return latest_spot_prices(
            (entry for page in pages for entry in page.get("SpotPriceHistory", [])),
            zone=self.options.availability_zone,
        )

    # ---- translation -----------------------------------------------------------------------------
    def _offer(self, itype: str, capacity: Capacity, price: float, available: bool) -> Offer:
        info = INSTANCE_TYPES[itype]
        return Offer(
            provider=self.name,
            offer_id=f"{itype}/{self.region}/{capacity.value}",
            gpu=info.gpu,
            gpu_count=info.gpu_count,
            region=self.region,
            on_demand_per_hour=price if capacity is Capacity.ON_DEMAND else None,
            spot_per_hour=price if capacity is Capacity.SPOT else None,
            available=available,
        )

    def _instance_type_of(self, offer: Offer) -> str:
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        if offer.region != self.region:
            raise InvalidRequest(
                f"unknown region {offer.region!r}; this account is configured for {self.region!r} "
                "(add another aws provider entry per region)",
                provider=self.name,
            )
        itype = offer.offer_id.split("/", 1)[0]
        if itype not in INSTANCE_TYPES:
            raise InvalidRequest(
                f"offer {offer.offer_id!r} names no known instance type; known: {', '.join(INSTANCE_TYPES)}",
                provider=self.name,
            )
        return itype

    async def _find_by_key(self, key: str) -> ProviderInstance | None:
        """One lookup before launching. A live instance wins over a terminated one with the same key."""
        found = [
            self._view(raw) for raw in await self._call("describe_instances", lambda c: self._describe_tagged(c, key))
        ]
        ours = sorted((v for v in found if v.key == key), key=lambda v: v.status.is_gone)
        return ours[0] if ours else None

    def _run_params(self, spec: LaunchSpec, itype: str) -> dict[str, Any]:
        o = self.options
        user_data = self.render_launch(spec.server).user_data() if spec.server is not None else None
        if user_data is not None and len(user_data.encode()) > USER_DATA_LIMIT:
            raise InvalidRequest(
                f"user data is {len(user_data.encode())} bytes; EC2 accepts at most {USER_DATA_LIMIT}",
                provider=self.name,
            )
        tags = {k: v for k, v in spec.tags.items() if not k.lower().startswith("aws:")}
        tags.update({"Name": spec.key, KEY_TAG: spec.key, TIER_TAG: spec.tier})
        tag_list = [{"Key": k, "Value": str(v)} for k, v in tags.items()]
        params: dict[str, Any] = {
            "ImageId": o.ami_id or f"resolve:ssm:{o.ami_ssm_parameter}",
            "InstanceType": itype,
            "MinCount": 1,
            "MaxCount": 1,
            "ClientToken": spec.key,  # EC2's own idempotency: a retried launch returns the same instance
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tag_list},
                {"ResourceType": "volume", "Tags": tag_list},
            ],
            "BlockDeviceMappings": [
                {
                    "DeviceName": o.root_device_name,
                    "Ebs": {"VolumeSize": o.root_volume_gb, "VolumeType": "gp3", "DeleteOnTermination": True},
                }
            ],
            # IMDSv2 only; hop limit 2 so a container on the box (the spot agent, vLLM) can reach it.
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 2},
            "InstanceInitiatedShutdownBehavior": "terminate",
        }
        if user_data:
            params["UserData"] = user_data  # boto3 base64-encodes it
        if o.subnet_id:
            params["SubnetId"] = o.subnet_id
        elif o.availability_zone:
            params["Placement"] = {"AvailabilityZone": o.availability_zone}
        if o.security_group_ids:
            params["SecurityGroupIds"] = list(o.security_group_ids)
        if o.key_name:
            params["KeyName"] = o.key_name
        if o.iam_instance_profile:
            field = "Arn" if o.iam_instance_profile.startswith("arn:") else "Name"
            params["IamInstanceProfile"] = {field: o.iam_instance_profile}
        if spec.capacity is Capacity.SPOT:
            spot_options: dict[str, Any] = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
            if spec.bid_per_hour is not None:
                spot_options["MaxPrice"] = f"{spec.bid_per_hour:.4f}"
            params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot_options}
        return params

    def _view(self, raw: Mapping[str, Any]) -> ProviderInstance:
        tags = {t.get("Key"): t.get("Value") for t in raw.get("Tags") or []}
        state = (raw.get("State") or {}).get("Name")
        reason = (raw.get("StateReason") or {}).get("Code") or ""
        status = instance_status(state, reason)
        itype = INSTANCE_TYPES.get(str(raw.get("InstanceType")))
        capacity = Capacity.SPOT if raw.get("InstanceLifecycle") == "spot" else Capacity.ON_DEMAND
        price = None
        if capacity is Capacity.ON_DEMAND and raw.get("InstanceType"):
            price = on_demand_price(str(raw["InstanceType"]), self.options.on_demand_prices)
        ip = raw.get("PrivateIpAddress") if self.options.use_private_ip else raw.get("PublicIpAddress")
        launched = raw.get("LaunchTime")
        return ProviderInstance(
            provider=self.name,
            provider_id=str(raw["InstanceId"]),
            key=tags.get(KEY_TAG),
            status=status,
            raw_status=f"{state}:{reason}" if reason else str(state or ""),
            gpu=itype.gpu if itype else None,
            gpu_count=itype.gpu_count if itype else None,
            region=self.region,
            capacity=capacity,
            price_per_hour=price,
            address=f"{ip}:{self.options.server_port}" if ip and status is InstanceStatus.RUNNING else None,
            created_at=launched.timestamp() if isinstance(launched, datetime) else None,
        )

    def _recently_launched(self, provider_id: str) -> bool:
        at = self._launched.get(provider_id)
        return at is not None and self.clock.monotonic() - at <= self.options.consistency_grace


def instance_status(state: str | None, reason: str) -> InstanceStatus:
    """EC2 state + StateReason.Code -> our status. A spot reclaim is PREEMPTED, a failed launch FAILED."""
    status = map_status(state, _STATUS)
    if status in (InstanceStatus.TERMINATED, InstanceStatus.STOPPING) and reason in _PREEMPTED_REASONS:
        return InstanceStatus.PREEMPTED
    if status is InstanceStatus.TERMINATED and reason in _FAILED_REASONS:
        return InstanceStatus.FAILED
    return status


def latest_spot_prices(entries: Any, *, zone: str | None = None) -> dict[str, float]:
    """From spot price history entries: the latest price per (type, zone), then per type the given zone's
    price or the cheapest zone's."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for entry in entries:
        try:
            itype, az = str(entry["InstanceType"]), str(entry["AvailabilityZone"])
            when, price = entry["Timestamp"], float(entry["SpotPrice"])
        except (KeyError, TypeError, ValueError):
            continue  # a malformed entry says nothing about the price
        if price <= 0 or (zone and az != zone):
            continue
        seen = latest.get((itype, az))
        if seen is None or when > seen[0]:
            latest[(itype, az)] = (when, price)
    best: dict[str, float] = {}
    for (itype, _az), (_when, price) in latest.items():
        best[itype] = min(price, best.get(itype, price))
    return best
