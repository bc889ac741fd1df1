"""Spheron AI adapter (https://app.spheron.ai, Bearer key). Translates only.

Spheron is a GPU marketplace: ``GET /api/gpu-offers`` lists offers from several upstream providers
(voltage-park, data-crunch, sesterce, massed-compute, spheron-ai, ...), each with a GPU type and
count, a whole-instance $/hour ``price`` (``spot_price`` on SPOT offers), the regions it can land
in (``clusters``) and the OS images it takes. A deployment must be built from ONE offer's fields, so
our ``Offer.offer_id`` carries them all (see ``OfferRef``). Deployments are named with our key.

Deleting before the minimum runtime (20 min) is refused with 400 ``canTerminate: false`` and a
``timeRemaining`` in minutes; that becomes ``DeleteDeferred(retry_after=...)`` and the caller retries
on a later tick: this adapter never waits it out.
"""

from __future__ import annotations

import builtins
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, ClassVar

from clocks import Clock
from providers.base import (
    BootstrapForm,
    Capacity,
    GpuRequest,
    InstanceStatus,
    LaunchSpec,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from providers.errors import (
    DeleteDeferred,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ListingIncomplete,
    ProviderError,
    QuotaExceeded,
    Transient,
)
from providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy, classify_status, shared_status
from providers.pacing import RequestBudget
from providers.paging import Paging, page_rows
from providers.registry import ProviderConfig
from providers.status import map_status
from providers.tagging import key_from_name, validate_key
from serving.bootstrap.cloud_init import CloudConfig
from sizing.gpus import UnknownGpu, normalize_gpu
from sizing.server import ServerDescription

DEFAULT_BASE_URL = "https://app.spheron.ai"

STATUS_TABLE: dict[str, InstanceStatus] = {
    "deploying": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "failed": InstanceStatus.FAILED,
    "terminated": InstanceStatus.TERMINATED,
    "terminated-provider": InstanceStatus.PREEMPTED,  # a spot instance taken back by the provider
    # "stopped" is deliberately absent: it still bills and will not end by itself -> UNKNOWN.
}

_CAPACITY_WORDS = re.compile(
    r"capacity|not available|unavailable|out of stock|sold out|no (?:available )?(?:gpu|machine|instance|node)", re.I
)
_QUOTA_WORDS = re.compile(r"balance|credit|quota|limit reached|spend", re.I)
_ALREADY_GONE = re.compile(r"already (?:been )?terminated|already deleted|not found|does not exist", re.I)
_SPOT_TYPES = {"SPOT"}
_REF_SEP = "|"


DEFAULT_PAGE_SIZE = 100
DEFAULT_MAX_PAGES = 1000


@dataclass(frozen=True, slots=True)
class SpheronOptions:
    team_id: str | None = None  # the billed team; required (see check_options)
    ssh_key_id: str | None = None  # a key registered in the Spheron dashboard (required on create)
    operating_system: str | None = None  # must be one of an offer's os_options; offers without it are skipped
    provider: str | None = None  # only offers from this upstream provider (e.g. "voltage-park")
    require_cloud_init: bool = True  # skip offers that cannot run our cloud-init bootstrap
    server_port: int = 8000
    timeout: float = 30.0
    max_attempts: int = 4
    max_wait: float = 30.0
    page_size: int = DEFAULT_PAGE_SIZE  # rows asked per page (offers and deployments); the server may send fewer
    max_pages: int = DEFAULT_MAX_PAGES  # a bound on one listing; reaching it raises ListingIncomplete, never truncates
    # Spheron's API reference ("Rate limits"): about 100-250 requests per 15 minutes per IP, and 10
    # deployment creates per 15 minutes per user. We keep to the low end unless told otherwise.
    requests_per_15min: int = 100
    creates_per_15min: int = 10

    _ALIASES = {"teamId": "team_id", "sshKeyId": "ssh_key_id", "operatingSystem": "operating_system"}

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> SpheronOptions:
        values = {cls._ALIASES.get(k, k): v for k, v in options.items()}
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown options {sorted(unknown)}; known: {sorted(known)}")
        if not str(values.get("team_id") or "").strip():
            raise ValueError(MISSING_TEAM)
        return cls(**values)


MISSING_TEAM = (
    "options.team_id is required: every Spheron deployment is billed to a team. Set it to your team id "
    "(dashboard: Settings -> Team; or the teamId of the current team in GET /api/balance)"
)


def check_options(options: Mapping[str, Any]) -> None:
    """Configuration-time check of a ``type: spheron`` provider's options; ValueError says what to fix."""
    SpheronOptions.from_mapping(options)


@dataclass(frozen=True, slots=True)
class OfferRef:
    """Everything a deployment needs from the offer it is built from, carried in ``Offer.offer_id``."""

    provider: str
    gpu_type: str
    offer_id: str
    instance_type: str
    operating_system: str

    def encode(self) -> str:
        return _REF_SEP.join((self.provider, self.gpu_type, self.offer_id, self.instance_type, self.operating_system))

    @classmethod
    def decode(cls, value: str, *, provider: str) -> OfferRef:
        parts = value.split(_REF_SEP)
        if len(parts) != 5 or not all(parts[:4]):
            raise InvalidRequest(
                f"offer id {value!r} was not issued by this adapter (expected provider|gpuType|offerId|type|os)",
                provider=provider,
            )
        return cls(*parts)


def canonical_gpu(group: dict[str, Any], offer: dict[str, Any]) -> str | None:
    """Catalogue name for a Spheron offer, trying the most specific spelling first; None if unknown."""
    interconnect = str(offer.get("interconnectType") or "")
    memory = offer.get("gpu_memory")
    names = [str(x) for x in (offer.get("gpuType"), group.get("gpuType"), group.get("gpuModel")) if x]
    names = [re.sub(r"[-_ ]?baremetal$", "", n, flags=re.I) for n in names]
    candidates: list[str] = []
    for name in names:
        if memory and interconnect:
            candidates.append(f"{name} {int(float(memory))}GB {interconnect}")
        if interconnect:
            candidates.append(f"{name} {interconnect}")
        if memory:
            candidates.append(f"{name} {int(float(memory))}GB")
        candidates.append(name)
    if group.get("displayName"):
        candidates.append(str(group["displayName"]))
    for candidate in candidates:
        try:
            return normalize_gpu(candidate)
        except UnknownGpu:
            continue
    return None


SPHERON_CLOUD_INIT_KEYS = {"packages", "write_files", "runcmd", "bootcmd"}


def cloud_init_payload(config: CloudConfig, *, provider: str) -> dict[str, Any]:
    """Spheron's structured ``cloudInit`` (packages, writeFiles, runcmd) from our cloud-config document.

    Translated key by key from the document itself (never from rendered YAML); keys Spheron does not take
    are refused rather than silently dropped. ``bootcmd`` (every boot, in cloud-init) becomes the first
    ``runcmd`` entries: Spheron runs them on the first boot only.
    """
    doc: Mapping[str, Any] = config.doc
    unsupported = set(doc) - SPHERON_CLOUD_INIT_KEYS
    if unsupported:
        raise InvalidRequest(
            f"cloud-config: Spheron's cloudInit takes packages, write_files and runcmd; not {sorted(unsupported)}",
            provider=provider,
        )
    payload: dict[str, Any] = {}
    if doc.get("packages"):
        payload["packages"] = [str(p) for p in doc["packages"]]
    if doc.get("write_files"):
        payload["writeFiles"] = [
            {
                k: v
                for k, v in (
                    ("path", f.get("path")),
                    ("content", f.get("content", "")),
                    ("permissions", f.get("permissions")),
                    ("owner", f.get("owner")),
                    ("encoding", f.get("encoding")),
                )
                if v is not None
            }
            for f in doc["write_files"]
        ]
    # Spheron has no every-boot hook: bootcmd runs once, first, with runcmd (a reboot skips it).
    commands = [*(doc.get("bootcmd") or []), *(doc.get("runcmd") or [])]
    if commands:
        payload["runcmd"] = [c if isinstance(c, str) else shlex.join(map(str, c)) for c in commands]
    return payload


def _message(body: Any) -> str:
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("error", "message") if isinstance(body.get(k), str)]
        if isinstance(body.get("error"), dict):
            parts.append(str(body["error"].get("message", "")))
        if body.get("code"):
            parts.insert(0, str(body["code"]))
        return ": ".join(p for p in parts if p) or "no error message"
    return str(body or "no error message")[:300]


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


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
        self._listing_pages = 1  # pages the last full deployment listing took
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
                if offer_gpu != gpu or _int(raw.get("gpuCount")) != want.count:
                    continue
                for offer in self._to_offers(group, raw, gpu, want):
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
        if wants_spot != (ref.instance_type in _SPOT_TYPES):
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
        # Lookup-then-create is the retried unit: after a timeout the deployment may exist already.
        return await self.api.retrying(lambda: self._create_once(spec, ref, cloud_init))

    async def get(self, provider_id: str) -> ProviderInstance:
        body = await self.api.request("GET", f"/api/deployments/{provider_id}")
        deployment = body.get("deployment", body) if isinstance(body, dict) else None
        if not isinstance(deployment, dict):
            raise InstanceNotFound(f"no deployment {provider_id}", provider=self.name)
        return self._view(deployment, key_prefix="")

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return await self.api.retrying(lambda: self._list_once(key_prefix))

    async def delete(self, provider_id: str) -> None:
        try:
            await self.api.request("DELETE", f"/api/deployments/{provider_id}")
        except InstanceNotFound:
            return  # gone already: success

    async def aclose(self) -> None:
        await self.api.aclose()

    # ---- internals -------------------------------------------------------------------------------
    async def _offer_groups(self, instance_type: str | None) -> builtins.list[dict[str, Any]]:
        """Every page of ``GET /api/gpu-offers`` (documented: ``page``, ``limit``, ``instanceType``;
        answers ``{data, total, page, limit, totalPages}``), for one instance type or the default view."""
        groups: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": self.options.page_size}
        if instance_type:
            params["instanceType"] = instance_type
        for page in range(1, self.options.max_pages + 1):
            body = await self.api.request("GET", "/api/gpu-offers", params={**params, "page": page})
            if not isinstance(body, dict):
                raise Transient("GET /api/gpu-offers answered without a JSON object", provider=self.name)
            rows = [g for g in body.get("data") or [] if isinstance(g, dict)]
            groups.extend(rows)
            if self._is_last(Paging.read(body, asked=self.options.page_size), page, len(rows), "/api/gpu-offers"):
                return groups
        raise ListingIncomplete(
            f"GET /api/gpu-offers has more than {self.options.max_pages} pages; raise options.max_pages",
            provider=self.name,
        )

    def _is_last(self, paging: Paging, page: int, rows: int, path: str) -> bool:
        last = paging.last(page, rows)
        if last is None:
            raise ListingIncomplete(
                f"GET {path}: page {page} came back full ({rows} rows) without saying whether more follow "
                "(no totalPages, total or hasMore): refusing to treat it as the whole list",
                provider=self.name,
            )
        return last

    async def _groups_for(self, capacity: Capacity | None) -> builtins.list[dict[str, Any]]:
        """Spot offers are only listed when asked for (``instanceType=SPOT``); the default view holds
        the dedicated, bare-metal and cluster offers."""
        groups: builtins.list[dict[str, Any]] = []
        if capacity is not Capacity.SPOT:
            groups.extend(await self._offer_groups(None))
        if capacity is not Capacity.ON_DEMAND:
            groups.extend(await self._offer_groups("SPOT"))
        return groups

    def _to_offers(
        self, group: dict[str, Any], raw: dict[str, Any], gpu: str, want: GpuRequest
    ) -> builtins.list[Offer]:
        upstream = str(raw.get("provider") or "")
        instance_type = str(raw.get("instanceType") or "DEDICATED").upper()
        is_spot = instance_type in _SPOT_TYPES
        capacity = Capacity.SPOT if is_spot else Capacity.ON_DEMAND
        if want.capacity not in (None, capacity):
            return []
        if self.options.provider and upstream != self.options.provider:
            return []
        if self.options.require_cloud_init and raw.get("supportsCloudInit") is False:
            return []
        os_name = self._pick_os([str(o) for o in raw.get("os_options") or []])
        price = _float(raw.get("spot_price") if is_spot and raw.get("spot_price") is not None else raw.get("price"))
        gpu_type = str(raw.get("gpuType") or group.get("gpuType") or "")
        if os_name is None or price is None or price <= 0 or not upstream or not gpu_type or not raw.get("offerId"):
            return []
        ref = OfferRef(upstream, gpu_type, str(raw["offerId"]), instance_type, os_name).encode()
        offers = []
        for region in (str(c) for c in raw.get("clusters") or []):
            if want.regions and region not in want.regions:
                continue
            offers.append(
                Offer(
                    provider=self.name,
                    offer_id=ref,
                    gpu=gpu,
                    gpu_count=want.count,
                    region=region,
                    on_demand_per_hour=None if is_spot else price,
                    spot_per_hour=price if is_spot else None,
                    available=bool(raw.get("available", True)),
                )
            )
        return offers

    def _pick_os(self, os_options: builtins.list[str]) -> str | None:
        if self.options.operating_system:
            return self.options.operating_system if self.options.operating_system in os_options else None
        for option in os_options:
            if "cuda" in option.lower():
                return option
        return os_options[0] if os_options else None

    async def _create_once(
        self, spec: LaunchSpec, ref: OfferRef, cloud_init: dict[str, Any] | None
    ) -> ProviderInstance:
        existing = [i for i in await self._list_once(spec.key) if i.key == spec.key]
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
        try:
            created = await self.api.request("POST", "/api/deployments", json=body, retry=False)
        except InstanceNotFound as exc:  # a 404 on create names something we referenced (SSH key, offer)
            raise InvalidRequest(f"{exc.args[0]} (check options.ssh_key_id and team_id)", provider=self.name) from None
        deployment = created.get("deployment", created) if isinstance(created, dict) else {}
        if not isinstance(deployment, dict) or not deployment.get("id"):
            raise ProviderError("POST /api/deployments returned no deployment id", provider=self.name)
        view = self._view(deployment, key_prefix="")
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
        deployments = await self._all_deployments()
        views = (self._view(d, key_prefix=key_prefix) for d in deployments)
        return [v for v in views if v.key is not None]

    async def _all_deployments(self) -> builtins.list[dict[str, Any]]:
        """Every deployment of the team, page after page, or an error: never a partial view.

        Spheron's reference does not say whether ``GET /api/deployments`` pages; accounts with hundreds
        of deployments get ``{data, page, limit, total, totalPages}`` pages (the envelope of
        ``/api/gpu-offers``). A bare array is one complete answer. A page that is full but names no
        further page, a page past which the server stops answering rows, or a total we did not reach
        all raise: an instance missing from a listing would be adopted by no one, or created twice.
        """
        params: dict[str, Any] = {"limit": self.options.page_size, "teamId": self._team_id}
        # As many pages as the last full listing took: start only when the request budget fits them all.
        self.api.reserve("GET", "/api/deployments", self._listing_pages)
        seen: dict[str, dict[str, Any]] = {}
        first_total: int | None = None
        for page in range(1, self.options.max_pages + 1):
            body = await self.api.request("GET", "/api/deployments", params={**params, "page": page}, retry=False)
            if isinstance(body, list):  # the documented shape: every deployment in one array
                self._listing_pages = 1
                return [d for d in body if isinstance(d, dict)]
            if not isinstance(body, dict):
                raise Transient("GET /api/deployments answered without a JSON list or object", provider=self.name)
            rows = [d for d in page_rows(body) if isinstance(d, dict)]
            for d in rows:
                seen[str(d.get("id") or d.get("_id") or len(seen))] = d
            paging = Paging.read(body, asked=self.options.page_size)
            self._listing_pages = max(self._listing_pages, paging.total_pages or page)  # learnt even if cut short
            first_total = paging.total if page == 1 else first_total
            if paging.total != first_total or (paging.total is not None and len(seen) > paging.total):
                # Deployments came or went while we paged: rows shifted across pages, one may have
                # slid past us. Offset paging cannot tell which, so read the whole list again.
                raise Transient(
                    f"GET /api/deployments: the list changed while paging ({first_total} -> {paging.total})",
                    provider=self.name,
                )
            if self._is_last(paging, page, len(rows), "/api/deployments"):
                if paging.total is not None and len(seen) < paging.total:
                    raise ListingIncomplete(
                        f"GET /api/deployments: {len(seen)} of {paging.total} deployments answered across {page} pages",
                        provider=self.name,
                    )
                return list(seen.values())
        raise ListingIncomplete(
            f"GET /api/deployments has more than {self.options.max_pages} pages of {self.options.page_size}; "
            "raise options.max_pages (or end old deployments) so every deployment is seen",
            provider=self.name,
        )

    def _view(self, d: dict[str, Any], *, key_prefix: str) -> ProviderInstance:
        raw_status = str(d.get("status") or "")
        status = map_status(raw_status, STATUS_TABLE)
        instance_type = str(d.get("instanceType") or "").upper()
        gpu = None
        for name in (d.get("gpuType"), d.get("gpuModelId"), d.get("gpuModel")):
            if name:
                try:
                    gpu = normalize_gpu(str(name))
                    break
                except UnknownGpu:
                    continue
        ip = d.get("ipAddress")
        return ProviderInstance(
            provider=self.name,
            provider_id=str(d.get("id") or d.get("_id") or ""),
            key=key_from_name(str(d.get("name") or ""), key_prefix),
            status=status,
            raw_status=raw_status,
            gpu=gpu,
            gpu_count=_int(d.get("gpuCount"), default=None),
            region=str(d["region"]) if d.get("region") else None,
            capacity=(Capacity.SPOT if instance_type in _SPOT_TYPES else Capacity.ON_DEMAND) if instance_type else None,
            price_per_hour=_float(d.get("hourlyRate")),
            # The address appears while still deploying; readiness is the status, not the IP.
            address=f"{ip}:{self.options.server_port}" if ip and status is InstanceStatus.RUNNING else None,
            created_at=_parse_time(d.get("createdAt")) or _parse_time(d.get("startedAt")),
        )

    def _map_error(self, failure: HttpFailure) -> ProviderError:
        body = failure.body
        message = _message(body)
        details = body if isinstance(body, dict) else {}
        if shared_status(failure.status):
            return classify_status(
                failure,
                self.name,
                message,
                credential_hint=self._key.hint,
                rate_limit_wait=_float(details.get("retryAfter")),
            )
        status = failure.status
        where = failure.where
        if failure.method == "DELETE" and status in (400, 409):
            if str(details.get("currentStatus") or "").lower() in ("terminated", "terminated-provider", "failed") or (
                _ALREADY_GONE.search(message)
            ):
                return InstanceNotFound(f"{where}: already terminated", provider=self.name)
            if details.get("canTerminate") is False:
                minutes = _float(details.get("timeRemaining"))
                return DeleteDeferred(
                    f"{where}: minimum runtime not met: {message}",
                    provider=self.name,
                    retry_after=minutes * 60.0 if minutes is not None else None,
                )
        if status == 404:
            return InstanceNotFound(f"{where}: {message}", provider=self.name)
        if status == 402 or _QUOTA_WORDS.search(message):
            return QuotaExceeded(f"{where}: {message}", provider=self.name)
        if _CAPACITY_WORDS.search(message):
            return InsufficientCapacity(f"{where}: {message}", provider=self.name)
        return InvalidRequest(f"{where}: HTTP {status}: {message}", provider=self.name)


def _int(value: Any, default: Any = 0) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
