"""Leader lease rules, pure: who holds the lease, when it expires, and how long the holder may act.

Two clocks, on purpose. Expiry (when a standby may take over) is judged on the *store's* clock — one clock
for every replica, so skew between daemon hosts cannot make two leaders. How long the holder itself may
act is judged on its *own monotonic* clock, measured from the moment it *sent* its last successful
renewal: it stops acting ``renew_deadline`` after that instant, which is before the store-side expiry
(``ttl`` after the renewal *landed*), so a paused or partitioned leader stops before a standby starts.
Whatever a deposed leader still tries to commit is refused by the fence (``lease_store.fence``).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

DEFAULT_TTL = 10.0
GLOBAL_LEASE = "global"  # the one lease the daemons elect their leader with
# The holder stops acting after this share of the TTL without a successful renewal; renewals are tried
# every ``RENEW_EVERY`` of the TTL, so two renewals may fail before it steps down.
RENEW_DEADLINE_SHARE = 2 / 3
RENEW_EVERY_SHARE = 1 / 5


class LeadershipLost(BaseException):
    """This daemon is no longer (or not surely) the leader: it must not commit or call a provider.

    A BaseException, like asyncio.CancelledError and for the same reason: the reconciler turns ordinary
    exceptions of one provider call into that call's failure and carries on, but a lost term must end
    the whole tick at once — not be counted as a failed create and backed off."""


@dataclass(frozen=True)
class Identity:
    """One daemon process: a unique holder id plus what an operator needs to find it."""

    holder: str
    host: str
    pid: int

    @classmethod
    def of_this_process(cls) -> Identity:
        host = socket.gethostname()
        pid = os.getpid()
        return cls(holder=f"{host}:{pid}:{uuid.uuid4().hex[:8]}", host=host, pid=pid)


@dataclass(frozen=True)
class Lease:
    """The stored lease row as read: who holds it, in which epoch, until when (store clock)."""

    name: str
    holder: str
    host: str
    pid: int
    epoch: int
    acquired_at: float
    renewed_at: float
    expires_at: float

    def expired(self, now: float) -> bool:
        """A lease is free once the store clock reaches its expiry (exactly ``ttl`` after a renewal)."""
        return now >= self.expires_at

    def held_by(self, holder: str) -> bool:
        return self.holder == holder


@dataclass(frozen=True)
class Term:
    """The holder's own view of its leadership: the epoch it won and when it last renewed (monotonic)."""

    name: str
    holder: str
    epoch: int
    ttl: float
    renewed_mono: float  # monotonic time *before* the last successful renewal was sent
    since: float  # store-clock time the term began

    @property
    def renew_deadline(self) -> float:
        return self.ttl * RENEW_DEADLINE_SHARE

    def valid(self, mono_now: float) -> bool:
        """May the holder still act? Only within the renew deadline of its last successful renewal."""
        return mono_now - self.renewed_mono < self.renew_deadline

    def renewed(self, sent_mono: float) -> Term:
        return Term(self.name, self.holder, self.epoch, self.ttl, sent_mono, self.since)


def renew_interval(ttl: float) -> float:
    return ttl * RENEW_EVERY_SHARE
