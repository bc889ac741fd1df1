"""The EC2 adapter: boto3 calls in worker threads, retried by tenacity on the injected clock (see the package's
docstring); the wire format is in ``wire.py``."""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from scalectl.clocks import Clock
from scalectl.providers.aws.catalog import INSTANCE_TYPES, instance_types_for, on_demand_price
from scalectl.providers.aws.errors import map_client_error
from scalectl.providers.aws.options import AwsOptions, require_boto3
from scalectl.providers.aws.wire import instance_view, latest_spot_prices, run_instances_params
from scalectl.providers.base import (
    BootstrapForm,
    Capacity,
    GpuRequest,
    LaunchSpec,
    ListFilter,
    NoticeDelivery,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from scalectl.providers.errors import InstanceNotFound, InvalidRequest, Transient, is_retryable
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.stop_start import STARTED_ALREADY, STOPPED_ALREADY, refuse
from scalectl.providers.tagging import KEY_TAG, key_from_name, validate_key
from scalectl.serving.bootstrap.cloud_init import CloudConfig
from scalectl.sizing.server import ServerDescription

log = logging.getLogger(__name__)
T = TypeVar("T")


class AwsEc2Provider:
    """EC2 on-demand and spot GPU instances, tagged with our key, launched with cloud-init user data."""

    list_page_size = 200  # describe_instances page size (MaxResults)
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.CLOUD_INIT,
        spot=True,
        interruption_notices=NoticeDelivery.PUSH,  # EventBridge's two-minute warning, posted to our webhook
        list_filter=ListFilter.NAME_PREFIX,  # a tag:scalectl-key wildcard filter
        list_page_size=list_page_size,
        # Boot paths (EC2 API Reference, StopInstances / StartInstances: "you are charged for Amazon EBS
        # volume usage" while stopped; a start can fail with InsufficientInstanceCapacity). One-time spot
        # instances cannot be stopped ("You can't start or stop Spot Instances"): refused.
        stop_start=True,
        billed_while_stopped="EBS volumes (and any Elastic IP), not the instance",
        resume_may_fail_no_capacity=True,
        persistent_volumes=True,  # EBS volumes and snapshots
        custom_images=True,  # AMIs of our own (ami_id)
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
        require_boto3(config.name)
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
        params = self._params(spec, itype)
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

    async def stop(self, provider_id: str) -> None:
        if (await self._stoppable(provider_id, "stop")).status not in STOPPED_ALREADY:
            await self._call("stop_instances", lambda c: c.stop_instances(InstanceIds=[provider_id]))

    async def start(self, provider_id: str) -> None:
        # No capacity for its type in its zone: InsufficientInstanceCapacity -> InsufficientCapacity.
        if (await self._stoppable(provider_id, "start")).status not in STARTED_ALREADY:
            await self._call("start_instances", lambda c: c.start_instances(InstanceIds=[provider_id]))

    async def _stoppable(self, provider_id: str, operation: str) -> ProviderInstance:
        found = await self.get(provider_id)
        if found.capacity is Capacity.SPOT:
            raise refuse(operation, provider=self.name, why=f"{provider_id} is a one-time spot instance")
        return found

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

    def _recently_launched(self, provider_id: str) -> bool:
        at = self._launched.get(provider_id)
        return at is not None and self.clock.monotonic() - at <= self.options.consistency_grace

    def _params(self, spec: LaunchSpec, itype: str) -> dict[str, Any]:
        return run_instances_params(spec, itype, self.options, provider=self.name)

    def _view(self, raw: Mapping[str, Any]) -> ProviderInstance:
        return instance_view(raw, self.options, provider=self.name)
