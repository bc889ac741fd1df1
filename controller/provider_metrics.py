"""Counts every provider API call (scalectl_provider_requests_total) by wrapping the adapters where the
daemon builds them: the reconciler and the adapters stay unaware of metrics."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar, cast

from controller.metrics import DaemonMetrics
from providers.base import GpuRequest, LaunchSpec, Offer, Provider, ProviderInstance
from providers.errors import InstanceNotFound

T = TypeVar("T")


class MeteredProvider:
    """A Provider that records each call's outcome; "not found" from get() is an answer, not an error."""

    def __init__(self, inner: Provider, metrics: DaemonMetrics):
        self.inner = inner
        self.name = inner.name
        self._metrics = metrics

    async def _count(self, operation: str, call: Awaitable[T]) -> T:
        try:
            result = await call
        except InstanceNotFound:
            self._metrics.record_provider_request(self.name, operation, ok=True)
            raise
        except BaseException:
            self._metrics.record_provider_request(self.name, operation, ok=False)
            raise
        self._metrics.record_provider_request(self.name, operation, ok=True)
        return result

    async def offers(self, want: GpuRequest) -> list[Offer]:
        return await self._count("offers", self.inner.offers(want))

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        return await self._count("create", self.inner.create(spec))

    async def get(self, provider_id: str) -> ProviderInstance:
        return await self._count("get", self.inner.get(provider_id))

    async def list(self, key_prefix: str) -> list[ProviderInstance]:
        return await self._count("list", self.inner.list(key_prefix))

    async def delete(self, provider_id: str) -> None:
        await self._count("delete", self.inner.delete(provider_id))

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:  # adapter extras (capabilities, state paths) pass through
        return getattr(self.inner, name)


def metered(providers: dict[str, Provider], metrics: DaemonMetrics) -> dict[str, Provider]:
    # Capabilities and render_launch pass through from the inner adapter (the protocol declares them on
    # the class): hence the cast.
    return {name: cast(Provider, MeteredProvider(p, metrics)) for name, p in providers.items()}
