"""The daemon's world clock, published in the store so every `scalectl` command reads stored times in the
same frame as the daemon that wrote them (a demo under ``--speed 60`` runs an hour per real minute)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the ORM loads with the store; `scalectl status` on SQLite uses WorldClock alone
    from scalectl.controller.store.repository import Store

DAEMON = "daemon"


@dataclass(frozen=True)
class WorldClock:
    speed: float
    world_at: float
    wall_at: float
    running: bool

    def now(self, wall: float) -> float:
        """The world's time at wall time ``wall``: it runs ``speed``× while the daemon runs, stands still
        (then follows the wall) once it stopped, and never goes back before the last published instant."""
        elapsed = max(0.0, wall - self.wall_at)
        return self.world_at + elapsed * (self.speed if self.running else 1.0)

    @property
    def accelerated(self) -> bool:
        return self.speed != 1.0


def publish(store: Store, *, speed: float, world: float, wall: float, running: bool = True) -> None:
    from scalectl.controller.store.models import WorldClockRecord

    with store.sessions.begin() as s:
        row = s.get(WorldClockRecord, DAEMON)
        if row is None:
            s.add(WorldClockRecord(name=DAEMON, speed=speed, world_at=world, wall_at=wall, running=running))
        else:
            row.speed, row.world_at, row.wall_at, row.running = speed, world, wall, running


def read(store: Store) -> WorldClock | None:
    from scalectl.controller.store.models import WorldClockRecord

    with store.sessions() as s:
        row = s.get(WorldClockRecord, DAEMON)
        if row is None:
            return None
        return WorldClock(row.speed, row.world_at, row.wall_at, row.running)


def world_now(store: Store, wall: float) -> float:
    """Now, in the frame the stored rows were written in (the wall clock when no daemon ever published)."""
    clock = read(store)
    return wall if clock is None else clock.now(wall)
