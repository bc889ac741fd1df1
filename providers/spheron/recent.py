"""The last complete deployments listing, for the look-up before a create.

Every create looks its key up first (a create that died with its process may have made the deployment).
On Spheron that look-up is a whole paged listing: an account with 820 old deployments at 20 a page takes 41
requests, and three creates in one tick tripled that — past the call deadline (each create cancelled, asked
again, cancelled: the tier never filled) and past the request budget. The reconciler listed the account at
the start of the same tick, so a create may use that listing instead when it is as good as a new one: it
started after this adapter last sent a create for the key (so a create of ours made before it is in it, as
far as the provider's listing lag allows — no less than in a new listing), and it is recent (another writer,
e.g. a former leader, is not assumed away for long)."""

from __future__ import annotations

from typing import Any

REUSE_FOR = 15.0  # seconds a complete listing may answer a create's look-up, from when it started


class RecentListing:
    def __init__(self, reuse_for: float = REUSE_FOR) -> None:
        self.reuse_for = reuse_for
        self._started: float | None = None  # when the last complete listing began (monotonic)
        self._deployments: list[dict[str, Any]] = []
        self._sent: dict[str, float] = {}  # key -> when a create for it was last sent (monotonic)

    def listed(self, started: float, deployments: list[dict[str, Any]]) -> None:
        """A listing that began at ``started`` answered every page."""
        if self._started is None or started >= self._started:
            self._started, self._deployments = started, deployments

    def sending(self, key: str, now: float) -> None:
        """A create for ``key`` is about to be sent: no listing begun before now may answer its look-up."""
        self._sent = {k: t for k, t in self._sent.items() if now - t <= self.reuse_for}
        self._sent[key] = now

    def for_lookup(self, key: str, now: float) -> list[dict[str, Any]] | None:
        """The deployments of a listing that may answer ``key``'s look-up now, or None: list again."""
        started = self._started
        if started is None or now - started > self.reuse_for:
            return None
        sent = self._sent.get(key)
        if sent is not None and sent >= started:
            return None
        return self._deployments
