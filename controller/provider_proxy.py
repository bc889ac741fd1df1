"""A provider that wraps another: every call passes through ``_around`` (the daemon meters calls and
fences them with it); capabilities, ``render_launch`` and adapter extras pass through untouched."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from scalectl.providers.base import GpuRequest, LaunchSpec, Offer, Provider, ProviderInstance

T = TypeVar("T")


class ProviderProxy:
    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name

    async def _around(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        """Override to act around each call; ``call`` starts it (nothing has started before)."""
        return await call()

    async def offers(self, want: GpuRequest) -> list[Offer]:
        return await self._around("offers", lambda: self.inner.offers(want))

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        return await self._around("create", lambda: self.inner.create(spec))

    async def get(self, provider_id: str) -> ProviderInstance:
        return await self._around("get", lambda: self.inner.get(provider_id))

    async def list(self, key_prefix: str) -> list[ProviderInstance]:
        return await self._around("list", lambda: self.inner.list(key_prefix))

    async def delete(self, provider_id: str) -> None:
        await self._around("delete", lambda: self.inner.delete(provider_id))

    async def stop(self, provider_id: str) -> None:
        await self._around("stop", lambda: self.inner.stop(provider_id))

    async def start(self, provider_id: str) -> None:
        await self._around("start", lambda: self.inner.start(provider_id))

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:  # capabilities, render_launch, state paths
        return getattr(self.inner, name)


def as_provider(proxy: ProviderProxy) -> Provider:
    """The Provider protocol declares capabilities and render_launch on the class; a proxy passes the
    inner adapter's through at run time, which the type checker cannot see: hence the cast."""
    return cast(Provider, proxy)
