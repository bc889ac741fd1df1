"""The Spheron adapter: requests (paged listings, idempotent creates, request budgets); the wire format is in
``wire.py``."""

from __future__ import annotations

import builtins
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
from scalectl.providers.errors import InstanceNotFound, InvalidRequest, ProviderError
from scalectl.providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy
from scalectl.providers.pacing import RequestBudget
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.spheron.listing import Listings
from scalectl.providers.spheron.options import DEFAULT_BASE_URL, DEFAULT_MAX_PAGES, DEFAULT_PAGE_SIZE, SpheronOptions
from scalectl.providers.spheron.recent import RecentListing
from scalectl.providers.spheron.wire import (
    SPOT_TYPES,
    OfferRef,
    canonical_gpu,
    cloud_init_payload,
    deployment_view,
    map_error,
    offers_from,
    to_int,
)
from scalectl.providers.stop_start import refuse
from scalectl.providers.tagging import validate_key
from scalectl.serving.bootstrap.cloud_init import CloudConfig
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu
from scalectl.sizing.server import ServerDescription


class SpheronProvider:
    """Spheron deployments as GPU instances."""

    # Deployments are listed page by page (the server's page size) and filtered here; a spot deployment
    # taken back shows up only as "terminated-provider".
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.CLOUD_INIT,  # structured cloudInit, translated from the cloud-config document
        spot=True,
        list_page_size=DEFAULT_PAGE_SIZE,  # the defaults; options may change them per account
        list_max_pages=DEFAULT_MAX_PAGES,  # reaching it raises ListingIncomplete, never truncates
        idle_list_every=20.0,  # 45 listings per 15 min when idle, inside the documented 100-250 requests
        # Spheron documents no listing consistency. The fault runs that doubled deployments had new ones
        # show 5-15 s late in GET /api/deployments; twice the longest, so a lost create is looked up, not repeated.
        listing_lag=30.0,
        # Boot paths: Spheron's API reference documents deploy and terminate, no stop or start; volumes
        # can be attached; the OS image is one the offer lists.
        stop_start=False,
        persistent_volumes=True,
        custom_images=False,
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> CloudConfig:
        return CloudConfig.of(server)

    def __init__(self, config: ProviderConfig, clock: Clock):
        self.name = config.name
        self.clock = clock
        try:
            self.options = SpheronOptions.from_mapping(config.options)
        except ValueError as exc:
            raise ValueError(f"provider {config.name!r} (type spheron): {exc}") from None
        self._key = ApiKey(config)
        self._key.load()  # a missing key fails the build, naming where to put it
        self._team_id = str(self.options.team_id)
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
            budgets=(
                RequestBudget(
                    clock, self.options.requests_per_15min, 900.0, source="Spheron: 100-250 requests / 15 min / IP"
                ),
                RequestBudget(
                    clock,
                    self.options.creates_per_15min,
                    900.0,
                    applies_to=("POST", "/api/deployments"),
                    source="Spheron: 10 deployment creates / 15 min / user",
                ),
            ),
        )
        self.listings = Listings(self.api, self.options, provider=self.name, team_id=self._team_id)
        self.recent = RecentListing()

    def __repr__(self) -> str:
        return f"SpheronProvider(name={self.name!r})"

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> builtins.list[Offer]:
        try:
            gpu = normalize_gpu(want.gpu)
        except UnknownGpu:
            return []
        found: list[Offer] = []
        regions_seen: set[str] = set()
        for group in await self._groups_for(want.capacity):
            for raw in group.get("offers") or []:
                if not isinstance(raw, dict):
                    continue
                regions_seen.update(str(c) for c in raw.get("clusters") or [])
                offer_gpu = canonical_gpu(group, raw)
                if offer_gpu != gpu or to_int(raw.get("gpuCount")) != want.count:
                    continue
                for offer in offers_from(group, raw, gpu, want, self.options, provider=self.name):
                    if (offer.offer_id, offer.region) not in {(o.offer_id, o.region) for o in found}:
                        found.append(offer)
        unknown = [r for r in want.regions if r not in regions_seen]
        if unknown and regions_seen:
            raise InvalidRequest(
                f"unknown region(s) {unknown}; Spheron offers regions: {', '.join(sorted(regions_seen))}",
                provider=self.name,
            )
        return found

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        validate_key(spec.key)
        offer = spec.offer
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        ref = OfferRef.decode(offer.offer_id, provider=self.name)
        wants_spot = spec.capacity is Capacity.SPOT
        if wants_spot != (ref.instance_type in SPOT_TYPES):
            raise InvalidRequest(
                f"offer {ref.offer_id} is {ref.instance_type}, not sold as {spec.capacity.value}", provider=self.name
            )
        if not self.options.ssh_key_id:
            raise InvalidRequest(
                "Spheron needs an SSH key on every deployment: set options.ssh_key_id to a key id from "
                "the Spheron dashboard",
                provider=self.name,
            )
        cloud_init = (
            cloud_init_payload(self.render_launch(spec.server), provider=self.name) if spec.server is not None else None
        )
        # Lookup-then-create is the retried unit, for failures that made nothing (not sent, 429); a create
        # whose answer was lost is never sent again here (CreateUnconfirmed): the listing may lag behind it.
        return await self.api.retrying(lambda: self._create_once(spec, ref, cloud_init))

    async def get(self, provider_id: str) -> ProviderInstance:
        body = await self.api.request("GET", f"/api/deployments/{provider_id}")
        deployment = body.get("deployment", body) if isinstance(body, dict) else None
        if not isinstance(deployment, dict):
            raise InstanceNotFound(f"no deployment {provider_id}", provider=self.name)
        return self._view(deployment, "")

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return await self.api.retrying(lambda: self._list_once(key_prefix))

    async def delete(self, provider_id: str) -> None:
        try:
            await self.api.request("DELETE", f"/api/deployments/{provider_id}")
        except InstanceNotFound:
            return  # gone already: success

    async def stop(self, provider_id: str) -> None:
        raise refuse("stop", provider=self.name, why="Spheron's API has no stop for deployments, only terminate")

    async def start(self, provider_id: str) -> None:
        raise refuse("start", provider=self.name, why="Spheron's API has no stop for deployments, only terminate")

    async def aclose(self) -> None:
        await self.api.aclose()

    # ---- internals -------------------------------------------------------------------------------
    async def _groups_for(self, capacity: Capacity | None) -> builtins.list[dict[str, Any]]:
        """Spot offers are only listed when asked for (``instanceType=SPOT``); the default view holds
        the dedicated, bare-metal and cluster offers."""
        groups: builtins.list[dict[str, Any]] = []
        if capacity is not Capacity.SPOT:
            groups.extend(await self.listings.offer_groups(None))
        if capacity is not Capacity.ON_DEMAND:
            groups.extend(await self.listings.offer_groups("SPOT"))
        return groups

    async def _create_once(
        self, spec: LaunchSpec, ref: OfferRef, cloud_init: dict[str, Any] | None
    ) -> ProviderInstance:
        existing = [i for i in await self._lookup(spec.key) if i.key == spec.key]
        if existing:
            return existing[0]
        body: dict[str, Any] = {
            "provider": ref.provider,
            "offerId": ref.offer_id,
            "gpuType": ref.gpu_type,
            "gpuCount": spec.offer.gpu_count,
            "region": spec.offer.region,
            "operatingSystem": ref.operating_system,
            "instanceType": ref.instance_type,
            "sshKeyId": self.options.ssh_key_id,
            "name": spec.key,
            "teamId": self._team_id,
        }
        if cloud_init:
            body["cloudInit"] = cloud_init
        lag = self.capabilities.listing_lag
        self.recent.sending(spec.key, self.clock.monotonic())
        try:
            created = await send_create(
                lambda: self.api.request("POST", "/api/deployments", json=body, retry=False),
                provider=self.name,
                clock=self.clock,
                listing_lag=lag,
            )
        except InstanceNotFound as exc:  # a 404 on create names something we referenced (SSH key, offer)
            raise InvalidRequest(f"{exc.args[0]} (check options.ssh_key_id and team_id)", provider=self.name) from None
        deployment = created.get("deployment", created) if isinstance(created, dict) else {}
        if not isinstance(deployment, dict) or not deployment.get("id"):
            raise unreadable("POST /api/deployments", provider=self.name, clock=self.clock, listing_lag=lag)
        view = self._view(deployment, "")
        # The create response may omit what we sent; fill it in rather than report None.
        return ProviderInstance(
            provider=self.name,
            provider_id=view.provider_id,
            key=spec.key,
            status=view.status if view.raw_status else InstanceStatus.PENDING,
            raw_status=view.raw_status or "deploying",
            gpu=spec.offer.gpu,
            gpu_count=spec.offer.gpu_count,
            region=spec.offer.region,
            capacity=spec.capacity,
            price_per_hour=view.price_per_hour or spec.offer.price(spec.capacity),
            address=view.address,
            created_at=view.created_at or self.clock.now(),
        )

    async def _list_once(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        started = self.clock.monotonic()
        deployments = await self.listings.all_deployments()
        self.recent.listed(started, deployments)
        return self._views(deployments, key_prefix)

    async def _lookup(self, key: str) -> builtins.list[ProviderInstance]:
        """Deployments under ``key``: from this tick's listing when it is as good as a new one
        (``recent.py``), else from a new listing."""
        known = self.recent.for_lookup(key, self.clock.monotonic())
        return self._views(known, key) if known is not None else await self._list_once(key)

    def _views(self, deployments: builtins.list[dict[str, Any]], key_prefix: str) -> builtins.list[ProviderInstance]:
        views = (self._view(d, key_prefix) for d in deployments)
        return [v for v in views if v.key is not None]

    def _view(self, deployment: dict[str, Any], key_prefix: str) -> ProviderInstance:
        return deployment_view(
            deployment, provider=self.name, key_prefix=key_prefix, server_port=self.options.server_port
        )

    def _map_error(self, failure: HttpFailure) -> ProviderError:
        return map_error(failure, provider=self.name, credential_hint=self._key.hint)
