"""The serving path, wired into the reconciler: what each new instance boots, when it is ready, when a
draining one has finished its requests, and where the load balancer sends traffic.

``build_hooks`` returns a :class:`ServingHooks`; ``reconciler_kwargs()`` are the Reconciler's hook
arguments and ``aclose()`` releases the HTTP client the probes share.

- server: one server description per tier (tuned ``vllm serve`` arguments); the launch carries it and the
  provider's adapter renders the form its cloud takes (see ``ProviderCapabilities.bootstrap``).
- readiness: ``/health`` 200 and ``/v1/models`` listing the served model with the launched max-model-len;
  skipped where the provider declares that "running" is serving.
- drain: ``/metrics`` read with the signal scraper's parser; running + waiting requests, None when the
  server cannot be read; 0 where the provider launches no server of ours. An instance still in the load
  balancer's configuration is never drained: on the tick it starts draining the routes are rewritten only
  after the drain check, so an idle moment there must not let it be deleted while the proxy still sends
  to it.
- routing: a RoutingTarget from the settings (nginx), one upstream per tier.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from scalectl.clocks import Clock
from scalectl.controller.activation import activated
from scalectl.controller.settings import Settings
from scalectl.domain.instance import Instance
from scalectl.providers.base import ProviderCapabilities
from scalectl.providers.registry import UnknownProviderType, capabilities_of
from scalectl.serving.activator import Activator
from scalectl.serving.readiness import ReadinessProbe
from scalectl.serving.routing import Endpoint, NginxTarget, RoutingTarget, TierRoute
from scalectl.sizing.errors import SizingError
from scalectl.sizing.gpus import UnknownGpu
from scalectl.sizing.server import ServerDescription, arg_value
from scalectl.sizing.vllm_args import SEQS_PER_TARGET
from scalectl.sources.vllm_scraper import VllmScraper
from scalectl.tiers.config import IMPLICIT_PROVIDERS, FleetConfig, TierSpec
from scalectl.tiers.server import describe_tier_server

log = logging.getLogger("scalectl.serving")

PROBE_TIMEOUT = 5.0
METRICS_TIMEOUT = 2.0
FleetSource = Callable[[], FleetConfig]


# ---- what a tier's server is (pure) ---------------------------------------------------------------
def describe_server(tier: TierSpec) -> tuple[ServerDescription, str | None]:
    """The tuned description, or, when the tier cannot be sized (a model the catalogue lacks, an unknown
    GPU), plain arguments from the ``serving:`` block and the reason tuning failed."""
    try:
        return describe_tier_server(tier), None
    except (SizingError, UnknownGpu) as exc:
        serving = tier.serving
        args = [
            "--host",
            "0.0.0.0",
            "--port",
            str(serving.port),
            "--max-model-len",
            str(serving.effective_max_model_len),
            "--max-num-seqs",
            str(math.ceil(serving.target_concurrency * SEQS_PER_TARGET)),
            "--gpu-memory-utilization",
            f"{serving.gpu_memory_utilization:g}",
        ]
        if serving.graceful_shutdown and tier.drain_timeout:
            args += ["--shutdown-timeout", str(int(tier.drain_timeout))]
        desc = ServerDescription(
            model=serving.model,
            args=(*args, *serving.extra_args),
            port=serving.port,
            image=serving.image,
            env={"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"},
            secret_env=(serving.hf_token_env,) if serving.hf_token_env else (),
            cache_dir=serving.model_cache_dir,
            stop_timeout=int(tier.drain_timeout) + 30,
        )
        return desc, str(exc)


def expected_max_model_len(desc: ServerDescription) -> int | None:
    value = arg_value(desc.args, "--max-model-len")
    return int(value) if value is not None and value.isdigit() else None


def provider_type(fleet: FleetConfig, name: str) -> str | None:
    entry = fleet.providers.get(name)
    if entry is not None:
        return entry.type
    return name if name in IMPLICIT_PROVIDERS else None


def provider_capabilities(fleet: FleetConfig, name: str) -> ProviderCapabilities | None:
    """What the named provider's adapter declares; None for a name or type we cannot resolve."""
    kind = provider_type(fleet, name)
    if kind is None:
        return None
    try:
        return capabilities_of(kind)
    except UnknownProviderType:
        return None


def routing_target(settings: Settings) -> RoutingTarget | None:
    if settings.routing == "none":
        return None
    return NginxTarget(
        settings.routing_conf_dir,
        nginx_bin=settings.routing_nginx_bin,
        main_conf=settings.routing_main_conf,
        prefix=settings.routing_prefix,
        test_command=settings.routing_test_command,
        reload_command=settings.routing_reload_command,
    )


# ---- the hooks ------------------------------------------------------------------------------------
class ServingHooks:
    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        fleet: FleetSource,
        *,
        router: RoutingTarget | None = None,
        client: httpx.AsyncClient | None = None,
        activator: Activator | None = None,
    ):
        self._settings = settings
        self._activator = activator
        self._fleet = fleet
        self._router = router
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=PROBE_TIMEOUT)
        self._probe = ReadinessProbe(clock, client=self._client)
        self._scraper = VllmScraper(self._client, clock, timeout=METRICS_TIMEOUT)
        # (tier, GPU, count) -> (spec fingerprint, description): a tier's variants each have their own server
        self._servers: dict[tuple[str, str, int], tuple[str, ServerDescription]] = {}
        self._routed: dict[str, frozenset[str]] = {}  # tier -> addresses the load balancer was last given

    def reconciler_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "readiness": self.readiness,
            "drain_check": self.drain_check,
            "server_for": self.server_for,
        }
        if self._router is not None:
            kwargs["route_update"] = self.route_update
            kwargs["route_remove"] = self.route_remove
        return kwargs

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    # -- the server a launch carries --------------------------------------------------------------
    def server_for(self, name: str, tier: TierSpec) -> ServerDescription:
        fingerprint = tier.model_dump_json()
        key = (name, tier.gpu, tier.gpu_count)
        cached = self._servers.get(key)
        if cached is None or cached[0] != fingerprint:
            desc, problem = describe_server(tier)
            if problem is not None:
                log.warning("tier %s: launching with untuned vLLM arguments: %s", name, problem)
            cached = self._servers[key] = (fingerprint, desc)
        return cached[1]

    # -- readiness --------------------------------------------------------------------------------
    async def readiness(self, tier: TierSpec, row: Instance) -> tuple[bool, str]:
        capabilities = self._capabilities(row.provider)
        if capabilities is not None and capabilities.running_means_ready:
            return True, "running (the provider's running is serving: nothing to probe)"
        if not row.address:
            return False, "the provider has not given an address yet"
        desc = self.server_for(row.tier, tier.on(row.gpu, row.gpu_count))
        result = await self._probe.check(row.address, desc.model, expected_max_model_len(desc))
        return result.ready, result.reason

    # -- drain ------------------------------------------------------------------------------------
    async def drain_check(self, row: Instance) -> float | None:
        """Requests the server still holds (running + waiting); None while unknown or still routed."""
        capabilities = self._capabilities(row.provider)
        if capabilities is not None and not capabilities.launches_server:
            return 0.0  # no server of ours holds requests there
        if not row.address:
            return None
        if self._router is not None:
            routed = self._routed.get(row.tier)
            if routed is None or row.address in routed:
                return None  # the proxy may still send it requests: not drained, whatever it says now
        (result,) = await self._scraper.scrape([row.address])
        snapshot = result.snapshot
        if snapshot is None or snapshot.running is None:
            log.debug("drain check %s: %s", row.key, result.error or "no vllm:num_requests_running")
            return None
        return snapshot.running + (snapshot.waiting or 0.0)

    # -- routing ----------------------------------------------------------------------------------
    async def route_update(
        self, name: str, tier: TierSpec, addresses: list[str], weights: Mapping[str, int] | None = None, /
    ) -> None:
        if self._router is None:
            return
        endpoints = []
        for address in addresses:
            try:
                endpoints.append(Endpoint(address, weight=(weights or {}).get(address, 1)))
            except ValueError as exc:
                log.warning("tier %s: not routing %r: %s", name, address, exc)
        activating = self._activator is not None and activated(self._settings, name, tier)
        route = TierRoute(
            name,
            session_affinity=tier.serving.session_affinity,
            listen=self._settings.routing_listen.get(name),
            activator=self._settings.activator_upstreams() if activating else (),
            activator_wait_s=math.ceil(tier.activator.max_wait),
        )
        if self._activator is not None:  # held requests go to the first ready instance now, not at nginx's reload
            self._activator.set_endpoints(name, [e.address for e in endpoints])
        result = await self._router.apply(route, endpoints)
        self._routed[name] = frozenset(e.address for e in endpoints)
        if result.changed:
            log.info("tier %s: load balancer now sends to %d instance(s)", name, result.endpoints)

    async def route_remove(self, name: str) -> None:
        """A removed tier's routing goes (its upstream file, for nginx), once its instances are gone."""
        remove = getattr(self._router, "remove", None)
        if remove is not None:
            await remove(name)
            log.info("tier %s: removed from the load balancer", name)
        self._routed.pop(name, None)

    # -- small pieces -----------------------------------------------------------------------------
    def _capabilities(self, provider: str) -> ProviderCapabilities | None:
        return provider_capabilities(self._fleet(), provider)


def build_hooks(
    settings: Settings, clock: Clock, fleet: FleetConfig | FleetSource, activator: Activator | None = None
) -> ServingHooks:
    """The daemon's serving hooks. ``fleet`` may be a callable returning the current config, so providers
    added by ``scalectl apply`` while running are recognised."""
    source: FleetSource = fleet if callable(fleet) else (lambda: fleet)
    return ServingHooks(settings, clock, source, router=routing_target(settings), activator=activator)
