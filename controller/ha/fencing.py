"""Fencing at the two edges where a deposed leader could do harm: the store commit and the provider call.

- ``fence_commits``: every commit on the leader's sessionmaker first checks, inside the transaction, that
  the lease is still ours in the same epoch (``LeaderElector.fence``); otherwise the commit raises
  ``LeadershipLost`` and nothing is written. Standby-side writers (webhook notices, heartbeats) use their
  own, unfenced sessions: recording a notice is safe from any replica.
- ``FencedProvider``: every provider call first asks ``LeaderElector.check``; a daemon whose term may have
  ended calls no provider.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from controller.ha.elector import LeaderElector
from providers.base import GpuRequest, LaunchSpec, Offer, Provider, ProviderInstance


def fence_commits(sessions: sessionmaker[Session], elector: LeaderElector) -> None:
    def _before_commit(session: Session) -> None:
        elector.fence(session)

    event.listen(sessions, "before_commit", _before_commit)


class FencedProvider:
    """A provider whose every call is made only inside a valid leadership term."""

    def __init__(self, inner: Provider, elector: LeaderElector) -> None:
        self._inner = inner
        self._elector = elector
        self.name = inner.name

    def __getattr__(self, attr: str) -> Any:  # capabilities, settings and helpers pass through
        return getattr(self._inner, attr)

    @property
    def inner(self) -> Provider:
        return self._inner

    async def offers(self, want: GpuRequest) -> list[Offer]:
        self._elector.check()
        return await self._inner.offers(want)

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        self._elector.check()
        return await self._inner.create(spec)

    async def get(self, provider_id: str) -> ProviderInstance:
        self._elector.check()
        return await self._inner.get(provider_id)

    async def list(self, key_prefix: str) -> list[ProviderInstance]:
        self._elector.check()
        return await self._inner.list(key_prefix)

    async def delete(self, provider_id: str) -> None:
        self._elector.check()
        await self._inner.delete(provider_id)

    async def aclose(self) -> None:
        await self._inner.aclose()


def fenced(provider: Provider, elector: LeaderElector) -> Provider:
    """The provider behind the fence. Capabilities and ``render_launch`` are the inner adapter's (passed
    through), which the Provider protocol declares on the class: hence the cast."""
    return cast(Provider, FencedProvider(provider, elector))
