"""``scalectl offers``: what every configured provider sells right now, normalised and sorted by price.

Builds the providers of a tiers file (its ``providers:`` block plus the implicit ``simulated`` /
``local`` ones its tiers use), asks them all concurrently through an ``OfferCache`` and prints one
table. A provider that cannot be built (missing credentials, bad options) or whose call fails gets
an error row naming it; the others are still listed. Exit 1 only when every provider failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from scalectl.cli.context import settings as load_settings
from scalectl.cli.context import user_errors
from scalectl.cli.output import EXIT_ERROR, EXIT_USAGE, Format, OutputOption, emit, fail
from scalectl.clocks import SystemClock
from scalectl.controller.app import provider_configs
from scalectl.controller.offers import OfferCache
from scalectl.providers.base import Capacity, GpuRequest, Offer, Provider
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu
from scalectl.tiers.config import FleetConfig, load_config

DEFAULT_TIMEOUT = 60.0
TABLE_COLUMNS = {
    "provider": "provider",
    "gpu": "GPU",
    "count": "count",
    "region": "region",
    "on_demand_per_hour": "on-demand $/h",
    "spot_per_hour": "spot $/h",
    "availability": "availability",
}


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    provider: str
    error: str


@dataclass(frozen=True, slots=True)
class OffersResult:
    offers: list[Offer]
    failures: list[ProviderFailure]
    answered: int  # providers with at least one answer (possibly no offers)

    @property
    def all_failed(self) -> bool:
        return self.answered == 0 and bool(self.failures)


# ---- pure parts ----------------------------------------------------------------------------------
def requests_for(fleet: FleetConfig, gpu: str | None, count: int | None, capacity: Capacity | None) -> list[GpuRequest]:
    """``--gpu``/``--count`` when given, else every (GPU, count) the tiers run, their variants' included."""
    if gpu is not None:
        return [GpuRequest(gpu=normalize_gpu(gpu), count=count or 1, capacity=capacity)]
    pairs = sorted(
        {
            (g, count or c)
            for t in fleet.tiers.values()
            for g, c in ((t.gpu, t.gpu_count), *((v.gpu, v.gpu_count) for v in t.variants))
        }
    )
    return [GpuRequest(gpu=g, count=c, capacity=capacity) for g, c in pairs]


def sort_price(offer: Offer, capacity: Capacity | None) -> float:
    """The price an offer is ranked by: the asked capacity's, else its cheapest; unpriced last."""
    prices = [offer.price(capacity)] if capacity else [offer.on_demand_per_hour, offer.spot_per_hour]
    known = [p for p in prices if p is not None]
    return min(known) if known else float("inf")


def sorted_offers(offers: Sequence[Offer], capacity: Capacity | None) -> list[Offer]:
    return sorted(offers, key=lambda o: (sort_price(o, capacity), o.provider, o.gpu, o.region, o.offer_id))


def offer_row(offer: Offer) -> dict[str, Any]:
    return {
        "provider": offer.provider,
        "gpu": offer.gpu,
        "count": offer.gpu_count,
        "region": offer.region,
        "on_demand_per_hour": offer.on_demand_per_hour,
        "spot_per_hour": offer.spot_per_hour,
        "available": offer.available,
        "available_count": offer.available_count,
        "offer_id": offer.offer_id,
    }


def availability(offer: Offer) -> str:
    word = "yes" if offer.available else "no"
    return f"{word} ({offer.available_count})" if offer.available_count is not None else word


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text or type(exc).__name__


# ---- I/O -----------------------------------------------------------------------------------------
def build_all(
    configs: Mapping[str, ProviderConfig], clock: SystemClock
) -> tuple[dict[str, Provider], list[ProviderFailure]]:
    built: dict[str, Provider] = {}
    failures: list[ProviderFailure] = []
    for name, config in configs.items():
        try:
            built[name] = build_provider(config, clock)
        except Exception as exc:  # missing credentials, bad options, unknown type: that provider only
            failures.append(ProviderFailure(name, one_line(exc)))
    return built, failures


async def ask_all(
    providers: Mapping[str, Provider], requests: Sequence[GpuRequest], cache: OfferCache, wait_seconds: float
) -> tuple[list[Offer], list[ProviderFailure], set[str]]:
    """Every provider x request at once: the offers, each failing provider once, and who answered."""

    async def ask(provider: Provider, request: GpuRequest) -> list[Offer]:
        try:
            return await asyncio.wait_for(cache.get(provider, request), wait_seconds)
        except TimeoutError:
            raise TimeoutError(f"no answer within {wait_seconds:g}s") from None

    calls = [(name, request) for name in providers for request in requests]
    results = await asyncio.gather(*(ask(providers[n], r) for n, r in calls), return_exceptions=True)
    offers: list[Offer] = []
    failures: dict[str, ProviderFailure] = {}
    answered: set[str] = set()
    for (name, _request), result in zip(calls, results, strict=True):
        if isinstance(result, BaseException):
            failures.setdefault(name, ProviderFailure(name, one_line(result)))
        else:
            answered.add(name)
            offers.extend(result)
    return offers, list(failures.values()), answered


async def collect(
    configs: Mapping[str, ProviderConfig], requests: Sequence[GpuRequest], *, wait_seconds: float = DEFAULT_TIMEOUT
) -> OffersResult:
    clock = SystemClock()
    providers, failures = build_all(configs, clock)
    try:
        offers, call_failures, answered = await ask_all(providers, requests, OfferCache(clock), wait_seconds)
    finally:
        for provider in providers.values():
            try:
                await provider.aclose()
            except Exception as exc:  # closing one must not hide the others' offers
                failures.append(ProviderFailure(provider.name, f"closing: {one_line(exc)}"))
    return OffersResult(offers, failures + call_failures, answered=len(answered))


def selected_configs(fleet: FleetConfig, only: Sequence[str]) -> dict[str, ProviderConfig]:
    configs = provider_configs(fleet, load_settings())
    unknown = [n for n in only if n not in configs]
    if unknown:
        known = ", ".join(sorted(configs)) or "(none)"
        fail(f"--provider: unknown provider(s) {', '.join(unknown)}; this file's providers: {known}", EXIT_USAGE)
    return {n: c for n, c in configs.items() if not only or n in only}


def render(result: OffersResult, capacity: Capacity | None, fmt: Format) -> None:
    offers = sorted_offers(result.offers, capacity)
    errors = [{"provider": f.provider, "error": f.error} for f in result.failures]
    if fmt is not Format.table:
        emit({"offers": [offer_row(o) for o in offers], "errors": errors}, fmt)
        return
    if offers:
        rows = [{**offer_row(o), "availability": availability(o)} for o in offers]
        emit([{label: row[key] for key, label in TABLE_COLUMNS.items()} for row in rows], fmt)
    else:
        typer.echo("no offers")
    if errors:
        emit(errors, fmt, columns=["provider", "error"], title="providers that failed")


# ---- the command ---------------------------------------------------------------------------------
def offers(
    file: Path | None = typer.Option(
        None, "--file", "-f", help="tiers.yaml whose providers to ask (default: the applied configuration)."
    ),
    gpu: str | None = typer.Option(None, "--gpu", "-g", help="GPU name, e.g. H100 (default: the tiers' GPUs)."),
    count: int | None = typer.Option(None, "--count", "-n", min=1, help="GPUs per offer (default: 1 with --gpu)."),
    spot: bool = typer.Option(False, "--spot", help="Only spot offers, ranked by spot price."),
    provider: list[str] | None = typer.Option(None, "--provider", "-p", help="Only this provider (repeatable)."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", min=1.0, help="Seconds to wait per provider."),
    output: Format = OutputOption,
) -> None:
    """Offers from every provider of a tiers file (or of the applied configuration): provider, GPU,
    count, region, $/h, availability."""
    with user_errors():
        fleet = load_config(file)[0] if file is not None else _applied_config()
    capacity = Capacity.SPOT if spot else None
    try:
        requests = requests_for(fleet, gpu, count, capacity)
    except UnknownGpu as exc:
        fail(f"--gpu: {exc}", EXIT_USAGE)
    configs = selected_configs(fleet, provider or [])
    if not configs:
        where = file or "the applied configuration"
        fail(f"{where}: no providers to ask: add a `providers:` block or name simulated/local in a tier", EXIT_USAGE)
    result = asyncio.run(collect(configs, requests, wait_seconds=timeout))
    render(result, capacity, output)
    if result.all_failed:
        Console(stderr=True).print("[bold red]error:[/] every provider failed; see above", highlight=False)
        raise typer.Exit(EXIT_ERROR)


def _applied_config() -> FleetConfig:
    from scalectl.cli.context import open_store, settings

    fleet = open_store(settings()).config.fleet_config()
    if fleet is None:
        fail("no configuration applied yet: pass -f tiers.yaml, or run `scalectl apply -f tiers.yaml`", EXIT_USAGE)
    return fleet


def register(app: typer.Typer) -> None:
    app.command("offers")(offers)
