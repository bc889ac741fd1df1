"""The Vast.ai adapter: searches, rentals (on demand or by bid) and the paged instance list (see the
package's docstring); the wire format is in ``wire.py``."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
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
from scalectl.providers.container import image_for, marked_env
from scalectl.providers.create_outcome import send_create, unreadable
from scalectl.providers.errors import (
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ListingIncomplete,
    ProviderError,
    QuotaExceeded,
    Transient,
)
from scalectl.providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy, classify_status
from scalectl.providers.json_values import as_list
from scalectl.providers.pacing import Pacer
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.tagging import validate_key
from scalectl.providers.vastai.options import VastOptions
from scalectl.providers.vastai.wire import (
    DEFAULT_BASE_URL,
    GONE_ASK,
    GPUS,
    INSTANCES,
    MAX_PAGES,
    PAGE_SIZE,
    QUOTA,
    SEARCH,
    THRESHOLD,
    countries,
    instance_view,
    offer_from,
    search_query,
)
from scalectl.serving.bootstrap.container import ContainerLaunch, container_launch
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu
from scalectl.sizing.server import ServerDescription


class VastAIProvider:
    """The Provider protocol over Vast.ai's REST API."""

    # The instance list is paged and filtered here (labels are not searchable); an outbid rental stops unwarned.
    # Vast.ai documents no listing consistency; 30 s, as for Spheron: twice the longest lag the fault runs
    # used (a lost rental is looked up for that long, never sent again at once).
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.CONTAINER,
        spot=True,
        list_page_size=PAGE_SIZE,
        list_max_pages=MAX_PAGES,
        listing_lag=30.0,
        # Boot paths (docs.vast.ai, "vastai stop instance" / "start instance": PUT /instances/{id}/ with a
        # state; "show instances": stopped bills disk, not the GPU). A start needs the same machine's GPUs:
        # when they were rented meanwhile it answers success and the instance sits in "scheduling".
        stop_start=True,
        billed_while_stopped="the instance's disk (storage), no GPU",
        resume_may_fail_no_capacity=True,
        persistent_volumes=True,  # "vastai create volume": volumes rented apart from instances
        custom_images=True,  # any container image
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> ContainerLaunch:
        return container_launch(server)

    def __init__(self, config: ProviderConfig, clock: Clock) -> None:
        self.name = config.name
        self.clock = clock
        self.options = VastOptions.from_mapping(config.options)
        self._key = ApiKey(config)  # read on the first request
        base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        base_url = base_url.removesuffix("/api/v0")  # accept the documented API root too
        self._http = ApiClient(
            provider=self.name,
            base_url=base_url,
            key=self._key,
            map_error=self._map_error,
            clock=clock,
            retry=RetryPolicy(max_attempts=self.options.attempts, max_retry_after=self.options.max_retry_after),
            timeout=self.options.timeout,
        )
        self._list_pacer = Pacer(clock, 0.0)  # spacing of list pages; learnt from Vast's 429 threshold

    def __repr__(self) -> str:
        return f"VastAIProvider(name={self.name!r})"

    @property
    def max_retries(self) -> int:
        return self._http.retry.max_retries

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> list[Offer]:
        try:
            gpu = normalize_gpu(want.gpu)
        except UnknownGpu:
            return []
        vast_gpu = GPUS.get(gpu)
        if vast_gpu is None:
            return []
        wanted = countries(want.regions, self.name)
        found: list[Offer] = []
        for capacity in (Capacity.ON_DEMAND, Capacity.SPOT):
            if want.capacity not in (None, capacity):
                continue
            query = search_query(vast_gpu, want, capacity, wanted, self.options)
            body = await self._http.request("POST", SEARCH, json=query)
            rows = body.get("offers") if isinstance(body, Mapping) else None
            for row in as_list(rows):
                offer = offer_from(row, gpu, vast_gpu, want, capacity, provider=self.name)
                if offer is not None:
                    found.append(offer)
        return found

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        try:
            validate_key(spec.key)
        except ValueError as exc:
            raise InvalidRequest(str(exc), provider=self.name) from None
        offer = spec.offer
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        if not offer.offer_id.isdigit():
            raise InvalidRequest(f"{offer.offer_id!r} is not a Vast.ai offer (ask) id", provider=self.name)
        body = self._rent_body(spec)

        async def find_or_rent() -> ProviderInstance:
            # Looked up again before every attempt that made nothing (not sent, 429). A rental whose answer
            # was lost or unreadable is never repeated here (CreateUnconfirmed): the listing may lag behind it.
            existing = await self._find(spec.key)
            if existing is not None:
                return existing
            lag = self.capabilities.listing_lag
            answer = await send_create(
                lambda: self._http.request("PUT", f"/api/v0/asks/{offer.offer_id}/", json=body, retry=False),
                provider=self.name,
                clock=self.clock,
                listing_lag=lag,
            )
            if not isinstance(answer, Mapping):  # a success we cannot read: the rental may exist
                raise unreadable(
                    f"PUT /api/v0/asks/{offer.offer_id}/", provider=self.name, clock=self.clock, listing_lag=lag
                )
            if not answer.get("new_contract"):
                message = answer.get("msg") if isinstance(answer, Mapping) else None
                raise InsufficientCapacity(
                    f"ask {offer.offer_id} was not rented: {message or answer}", provider=self.name
                )
            return ProviderInstance(
                provider=self.name,
                provider_id=str(answer["new_contract"]),
                key=spec.key,
                status=InstanceStatus.PENDING,
                raw_status="created",
                gpu=offer.gpu,
                gpu_count=offer.gpu_count,
                region=offer.region,
                capacity=spec.capacity,
                price_per_hour=body.get("price") or offer.price(spec.capacity),
            )

        return await self._http.retrying(find_or_rent)

    async def get(self, provider_id: str) -> ProviderInstance:
        if not provider_id.isdigit():
            raise InstanceNotFound(f"no instance {provider_id!r} (Vast.ai ids are numbers)", provider=self.name)
        body = await self._http.request("GET", f"/api/v0/instances/{provider_id}/", params={"owner": "me"})
        row = body.get("instances") if isinstance(body, Mapping) else None
        if not isinstance(row, Mapping):  # Vast answers {"instances": null} for an instance it does not know
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        return instance_view(row, provider=self.name)

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return await self._http.retrying(lambda: self._list(key_prefix))

    async def delete(self, provider_id: str) -> None:
        if not provider_id.isdigit():
            return  # no such instance can exist: nothing to delete
        try:
            await self._http.request("DELETE", f"/api/v0/instances/{provider_id}/", json={})
        except InstanceNotFound:
            return  # already gone: success

    async def stop(self, provider_id: str) -> None:
        await self._set_state(provider_id, "stopped")

    async def start(self, provider_id: str) -> None:
        # Vast answers success even when the machine's GPUs were taken: the instance then stays in
        # "scheduling" (PENDING) until they are free, which only a later ``get`` shows.
        await self._set_state(provider_id, "running")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _set_state(self, provider_id: str, state: str) -> None:
        """Stop or start: Vast sets the instance's intended state, which is idempotent by nature."""
        if not provider_id.isdigit():
            raise InstanceNotFound(f"no instance {provider_id!r} (Vast.ai ids are numbers)", provider=self.name)
        await self._http.request("PUT", f"/api/v0/instances/{provider_id}/", json={"state": state})

    # ---- requests --------------------------------------------------------------------------------
    async def _list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        views: builtins.list[ProviderInstance] = []
        token: str | None = None
        for _page in range(MAX_PAGES):
            params: dict[str, Any] = {"limit": PAGE_SIZE}
            if token:
                params["after_token"] = token
            body = await self._http.request("GET", INSTANCES, params=params, retry=False, pacer=self._list_pacer)
            if not isinstance(body, Mapping):
                raise Transient("the instance list answered without a JSON object", provider=self.name)
            for row in as_list(body.get("instances")):
                if isinstance(row, Mapping) and row.get("id") is not None:
                    view = instance_view(row, provider=self.name)
                    if view.key is not None and view.key.startswith(key_prefix):
                        views.append(view)
            following = body.get("next_token") if isinstance(body.get("next_token"), str) else None
            if following and following == token:
                raise ListingIncomplete("the instance list repeated its page token", provider=self.name)
            token = following
            if not token:
                return views
        raise ListingIncomplete(
            f"the instance list has more than {MAX_PAGES} pages of {PAGE_SIZE}: not all instances could be seen",
            provider=self.name,
        )

    async def _find(self, key: str) -> ProviderInstance | None:
        for view in await self._http.retrying(lambda: self._list(key)):
            if view.key == key and view.status is not InstanceStatus.TERMINATED:
                return view
        return None

    def _rent_body(self, spec: LaunchSpec) -> dict[str, Any]:
        bootstrap = self.render_launch(spec.server) if spec.server is not None else ContainerLaunch()
        env = marked_env(spec, bootstrap)
        for port in bootstrap.ports:
            env[f"-p {port}:{port}"] = "1"  # Vast takes port mappings as "-p" keys of the env object
        body: dict[str, Any] = {
            "client_id": "me",
            "image": image_for(bootstrap, self.options.default_image, provider=self.name, cloud="Vast.ai"),
            "env": env,
            "disk": self.options.disk_gb,
            "label": spec.key,
            "runtype": "args",
            "cancel_unavail": True,  # fail now rather than queue when the machine is taken meanwhile
        }
        if bootstrap.args:
            body["args"] = list(bootstrap.args)
        if spec.capacity is Capacity.SPOT:
            bid = spec.bid_per_hour if spec.bid_per_hour is not None else spec.offer.spot_per_hour
            if bid is None or bid <= 0:
                raise InvalidRequest(
                    f"offer {spec.offer.offer_id} has no bid price and none was given", provider=self.name
                )
            body["price"] = round(bid, 4)  # per machine $/hour: this is what makes the rental interruptible
        return body

    def _map_error(self, failure: HttpFailure) -> ProviderError:
        message = failure.message("msg", "message", "error", "detail")
        code = failure.body.get("error") if isinstance(failure.body, Mapping) else None
        lowered = f"{code or ''} {message}".lower()
        where = failure.where
        if failure.path.startswith("/api/v0/asks/") and (
            failure.status in (404, 410) or any(t in lowered for t in GONE_ASK)
        ):
            return InsufficientCapacity(f"{where}: the offer is gone ({message or failure.status})", provider=self.name)
        if failure.status in (400, 402, 403) and any(t in lowered for t in QUOTA):
            return QuotaExceeded(f"{where}: {message}", provider=self.name)
        if code == "no_such_instance":
            return InstanceNotFound(f"{where}: {message}", provider=self.name)
        return classify_status(
            failure,
            self.name,
            message,
            credential_hint=self._key.hint,
            rate_limit_wait=self._learn_threshold(failure) or self.options.rate_limit_wait,
        )

    def _learn_threshold(self, failure: HttpFailure) -> float | None:
        """Vast's 429 names no wait in headers, but its text may name the endpoint's minimum interval
        ("API requests too frequent: endpoint threshold=1.5"): that is the wait, and the instance list
        then spaces its pages by it."""
        if failure.status != 429:
            return None
        found = THRESHOLD.search(str(failure.body or ""))
        if found is None:
            return None
        interval = float(found.group(1))
        if failure.path.startswith(INSTANCES):
            self._list_pacer.interval = max(self._list_pacer.interval, interval)
        return interval
