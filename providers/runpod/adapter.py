"""The RunPod adapter: on-demand pods over REST v2, interruptible pods and prices over GraphQL (see the
package's docstring); the wire format is in ``wire.py``."""

from __future__ import annotations

import builtins
import shlex
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
from scalectl.providers.create_outcome import send_create
from scalectl.providers.errors import InstanceNotFound, InsufficientCapacity, InvalidRequest, ProviderError, Transient
from scalectl.providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy
from scalectl.providers.json_values import as_list
from scalectl.providers.pacing import RequestBudget
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.runpod.options import RunPodOptions
from scalectl.providers.runpod.wire import (
    ANYWHERE,
    DATA_CENTERS_QUERY,
    DEFAULT_BASE_URL,
    GPU_IDS,
    GPU_TYPES_QUERY,
    GRAPHQL,
    PODS,
    RENT_INTERRUPTABLE,
    graphql_error,
    map_error,
    offers_from,
    pod_view,
)
from scalectl.providers.stop_start import STARTED_ALREADY, STOPPED_ALREADY, refuse
from scalectl.providers.tagging import validate_key
from scalectl.serving.bootstrap.container import ContainerLaunch, container_launch
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu
from scalectl.sizing.server import ServerDescription


class RunPodProvider:
    """The Provider protocol over RunPod's REST v2 and GraphQL APIs."""

    # GET /v2/pods answers with every pod of the account at once; interruptible pods end without notice.
    # RunPod documents no listing consistency; 30 s, as for Spheron: twice the longest lag the fault runs
    # used (a lost create is looked up for that long, never sent again at once).
    # Boot paths (docs.runpod.io: POST /pods/{podId}/stop and /start; runpodctl stop pod: "you'll continue
    # to be charged for storage"; a stopped pod starts on the same host only if its GPUs are free).
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.CONTAINER,
        spot=True,
        listing_lag=30.0,
        stop_start=True,  # on-demand pods only: a stopped interruptible pod reads like a preempted one
        billed_while_stopped="the pod's volume disk (container disk is reset)",
        resume_may_fail_no_capacity=True,
        persistent_volumes=True,  # network volumes outlive pods
        custom_images=True,  # any container image
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> ContainerLaunch:
        return container_launch(server)

    def __init__(self, config: ProviderConfig, clock: Clock) -> None:
        self.name = config.name
        self.clock = clock
        self.options = RunPodOptions.from_mapping(config.options)
        self._key = ApiKey(config)  # read on the first request
        self._data_centers: tuple[str, ...] | None = None
        self._http = ApiClient(
            provider=self.name,
            base_url=config.base_url or DEFAULT_BASE_URL,
            key=self._key,
            map_error=self._map_error,
            clock=clock,
            retry=RetryPolicy(max_attempts=self.options.attempts, max_retry_after=self.options.max_retry_after),
            timeout=self.options.timeout,
            # RunPod's REST v2 publishes no numbers but reports each user's quota on every response
            # (IETF RateLimit headers, docs.runpod.io/api-reference-v2/rate-limits): once it says none
            # remain, nothing is sent until its reset.
            budgets=(RequestBudget(clock, None, 60.0, source="RunPod: RateLimit headers"),),
        )

    def __repr__(self) -> str:
        return f"RunPodProvider(name={self.name!r})"

    @property
    def max_retries(self) -> int:
        return self._http.retry.max_retries

    # ---- Provider protocol -----------------------------------------------------------------------
    async def offers(self, want: GpuRequest) -> list[Offer]:
        try:
            gpu = normalize_gpu(want.gpu)
        except UnknownGpu:
            return []
        gpu_id = GPU_IDS.get(gpu)
        if gpu_id is None:
            return []  # RunPod does not rent this GPU
        found: list[Offer] = []
        for region in await self._regions(want.regions):
            lowest: dict[str, Any] = {"gpuCount": want.count}
            if self.options.cloud != "ALL":
                lowest["secureCloud"] = self.options.cloud == "SECURE"
            if region != ANYWHERE:
                lowest["dataCenterId"] = region
            data = await self._graphql(GPU_TYPES_QUERY, {"gpuTypes": {"id": gpu_id}, "lowestPrice": lowest})
            for gpu_type in as_list(data.get("gpuTypes")):
                if isinstance(gpu_type, Mapping) and gpu_type.get("id") == gpu_id:
                    found.extend(offers_from(gpu_type, gpu, want, region, cloud=self.options.cloud, provider=self.name))
        return found

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        try:
            validate_key(spec.key)
        except ValueError as exc:
            raise InvalidRequest(str(exc), provider=self.name) from None
        offer = spec.offer
        if offer.provider != self.name:
            raise InvalidRequest(f"offer {offer.offer_id} belongs to {offer.provider}", provider=self.name)
        try:
            gpu_id = GPU_IDS[normalize_gpu(offer.gpu)]
        except (UnknownGpu, KeyError):
            raise InvalidRequest(f"RunPod has no GPU type for {offer.gpu!r}", provider=self.name) from None
        boot = self.render_launch(spec.server) if spec.server is not None else ContainerLaunch()
        image = image_for(boot, self.options.default_image, provider=self.name, cloud="RunPod")
        if spec.capacity is Capacity.SPOT:
            bid = spec.bid_per_hour if spec.bid_per_hour is not None else offer.spot_per_hour
            if bid is None or bid <= 0:
                raise InvalidRequest(
                    f"offer {offer.offer_id} has no spot price and no bid was given", provider=self.name
                )

            async def launch() -> Any:
                return await self._rent_interruptable(spec, boot, gpu_id, image, bid)
        else:

            async def launch() -> Any:
                body = self._pod_body(spec, boot, gpu_id, image)
                return await self._http.request("POST", PODS, json=body, retry=False)

        async def launched() -> ProviderInstance:
            return pod_view(await launch(), provider=self.name, capacity=spec.capacity)  # no pod: Transient

        async def find_or_launch() -> ProviderInstance:
            # Looked up again before every attempt that made nothing (not sent, 429). A launch whose answer
            # was lost or unreadable is never repeated here (CreateUnconfirmed): the listing may lag behind it.
            existing = await self._find(spec.key, retry=True)
            if existing is not None:
                return existing
            lag = self.capabilities.listing_lag
            return await send_create(launched, provider=self.name, clock=self.clock, listing_lag=lag)

        return await self._http.retrying(find_or_launch)

    async def get(self, provider_id: str) -> ProviderInstance:
        return pod_view(await self._http.request("GET", f"{PODS}/{provider_id}"), provider=self.name)

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return await self._list(key_prefix, retry=True)

    async def delete(self, provider_id: str) -> None:
        try:
            await self._http.request("DELETE", f"{PODS}/{provider_id}")
        except InstanceNotFound:
            return  # already gone: success

    async def stop(self, provider_id: str) -> None:
        pod = await self._stoppable(provider_id, "stop")
        if pod.status not in STOPPED_ALREADY:
            await self._http.request("POST", f"{PODS}/{provider_id}/stop")

    async def start(self, provider_id: str) -> None:
        pod = await self._stoppable(provider_id, "start")
        if pod.status not in STARTED_ALREADY:  # no free GPU on its host: 400 "not enough free GPUs" -> capacity
            await self._http.request("POST", f"{PODS}/{provider_id}/start")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _stoppable(self, provider_id: str, operation: str) -> ProviderInstance:
        pod = await self.get(provider_id)
        if pod.capacity is Capacity.SPOT:
            raise refuse(
                operation,
                provider=self.name,
                why=f"pod {provider_id} is interruptible, and RunPod shows a stopped one as it shows a preempted one",
            )
        return pod

    # ---- requests --------------------------------------------------------------------------------
    async def _list(self, key_prefix: str, *, retry: bool) -> builtins.list[ProviderInstance]:
        # REST v2 GET /v2/pods returns every pod of the account in one response (no paging parameters).
        body = await self._http.request("GET", PODS, retry=retry)
        pods = body.get("pods") if isinstance(body, Mapping) else body
        views = [pod_view(pod, provider=self.name) for pod in as_list(pods) if isinstance(pod, Mapping)]
        return [v for v in views if v.key is not None and v.key.startswith(key_prefix)]

    async def _find(self, key: str, *, retry: bool) -> ProviderInstance | None:
        for view in await self._list(key, retry=retry):
            if view.key == key and view.status is not InstanceStatus.TERMINATED:
                return view
        return None

    async def _rent_interruptable(
        self, spec: LaunchSpec, boot: ContainerLaunch, gpu_id: str, image: str, bid: float
    ) -> Any:
        count = spec.offer.gpu_count
        pod_input: dict[str, Any] = {
            "name": spec.key,
            "imageName": image,
            "gpuTypeId": gpu_id,
            "gpuCount": count,
            "bidPerGpu": round(bid / count, 4),  # RunPod bids per GPU; our bid is for the whole pod
            "cloudType": self.options.cloud,
            "containerDiskInGb": self.options.container_disk_gb,
            "volumeInGb": 0,
            "dockerArgs": shlex.join(boot.args),
            "ports": ",".join(self._ports(boot)),
            "env": [{"key": k, "value": v} for k, v in marked_env(spec, boot).items()],
        }
        if self.options.port_protocol == "tcp":
            pod_input["supportPublicIp"] = True
        if spec.offer.region != ANYWHERE:
            pod_input["dataCenterId"] = spec.offer.region
        data = await self._graphql(RENT_INTERRUPTABLE, {"input": pod_input}, retry=False)
        pod = data.get("podRentInterruptable")
        if not isinstance(pod, Mapping) or not pod.get("id"):
            raise InsufficientCapacity("podRentInterruptable returned no pod", provider=self.name)
        return {**pod, "env": marked_env(spec, boot), "name": pod.get("name") or spec.key}

    def _pod_body(self, spec: LaunchSpec, boot: ContainerLaunch, gpu_id: str, image: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": spec.key,
            "image": image,
            "env": marked_env(spec, boot),
            "ports": self._ports(boot),
            "disk": self.options.container_disk_gb,
            "gpu": {"id": gpu_id, "count": spec.offer.gpu_count},
            "cloud": self.options.cloud,
        }
        if boot.args:
            body["args"] = shlex.join(boot.args)
        if spec.offer.region != ANYWHERE:
            body["dataCenterIds"] = [spec.offer.region]
        return body

    def _ports(self, boot: ContainerLaunch) -> builtins.list[str]:
        return [f"{port}/{self.options.port_protocol}" for port in boot.ports]

    async def _graphql(self, query: str, variables: Mapping[str, Any], *, retry: bool = True) -> dict[str, Any]:
        async def once() -> dict[str, Any]:
            body = await self._http.request(
                "POST", GRAPHQL, json={"query": query, "variables": dict(variables)}, retry=False
            )
            if not isinstance(body, Mapping):
                raise Transient("GraphQL answered without a JSON object", provider=self.name)
            errors = body.get("errors")
            if errors:
                raise graphql_error(
                    errors, provider=self.name, credential_hint=self._key.hint, redact=self._http.redact
                )
            data = body.get("data")
            return dict(data) if isinstance(data, Mapping) else {}

        return await self._http.retrying(once) if retry else await once()

    async def _regions(self, wanted: tuple[str, ...]) -> builtins.list[str]:
        if not wanted:
            return [ANYWHERE]
        if self._data_centers is None:
            data = await self._graphql(DATA_CENTERS_QUERY, {})
            ids = (dc.get("id") for dc in as_list(data.get("dataCenters")) if isinstance(dc, Mapping))
            self._data_centers = tuple(sorted(i for i in ids if isinstance(i, str)))
        unknown = [r for r in wanted if r != ANYWHERE and r not in self._data_centers]
        if unknown:
            raise InvalidRequest(
                f"unknown RunPod data center(s) {', '.join(unknown)}; data centers: "
                f"{', '.join(self._data_centers) or '(none listed)'} (or '{ANYWHERE}')",
                provider=self.name,
            )
        return list(wanted)

    def _map_error(self, failure: HttpFailure) -> ProviderError:
        return map_error(failure, provider=self.name, credential_hint=self._key.hint, redact=self._http.redact)
