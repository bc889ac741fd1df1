"""Fencing at the two edges where a deposed leader could do harm: the store commit and the provider call.

- ``fence_commits``: every commit on the leader's sessionmaker first checks, inside the transaction, that
  the lease is still ours in the same epoch (``LeaderElector.fence``); otherwise the commit raises
  ``LeadershipLost`` and nothing is written. Standby-side writers (webhook notices, heartbeats) use their
  own, unfenced sessions: recording a notice is safe from any replica.
- ``FencedProvider``: every provider call first asks ``LeaderElector.check``; a daemon whose term may have
  ended calls no provider.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.provider_proxy import ProviderProxy, as_provider
from scalectl.providers.base import Provider

T = TypeVar("T")


class Fence(Protocol):
    """What fencing asks of an elector (one leader, or leases per tier)."""

    def check(self) -> Any: ...  # raises LeadershipLost when this daemon may no longer act

    def fence(self, session: Session) -> None: ...  # the same, and the store agrees, inside a transaction


def fence_commits(sessions: sessionmaker[Session], elector: Fence) -> None:
    def _before_commit(session: Session) -> None:
        elector.fence(session)

    event.listen(sessions, "before_commit", _before_commit)


class FencedProvider(ProviderProxy):
    """A provider whose every call is made only inside a valid leadership term."""

    def __init__(self, inner: Provider, elector: Fence) -> None:
        super().__init__(inner)
        self._elector = elector

    async def _around(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        self._elector.check()  # before the call starts: a deposed daemon sends nothing
        return await call()


def fenced(provider: Provider, elector: Fence) -> Provider:
    """The provider behind the fence."""
    return as_provider(FencedProvider(provider, elector))
