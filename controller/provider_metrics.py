"""Counts every provider API call (scalectl_provider_requests_total) by wrapping the adapters where the
daemon builds them: the reconciler and the adapters stay unaware of metrics."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from scalectl.controller.metrics import DaemonMetrics
from scalectl.controller.provider_proxy import ProviderProxy, as_provider
from scalectl.providers.base import Provider
from scalectl.providers.errors import InstanceNotFound

T = TypeVar("T")


class MeteredProvider(ProviderProxy):
    """A Provider that records each call's outcome; "not found" from get() is an answer, not an error."""

    def __init__(self, inner: Provider, metrics: DaemonMetrics):
        super().__init__(inner)
        self._metrics = metrics

    async def _around(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        try:
            result = await call()
        except InstanceNotFound:
            self._metrics.record_provider_request(self.name, operation, ok=True)
            raise
        except BaseException:
            self._metrics.record_provider_request(self.name, operation, ok=False)
            raise
        self._metrics.record_provider_request(self.name, operation, ok=True)
        return result


def metered(providers: dict[str, Provider], metrics: DaemonMetrics) -> dict[str, Provider]:
    return {name: as_provider(MeteredProvider(p, metrics)) for name, p in providers.items()}
