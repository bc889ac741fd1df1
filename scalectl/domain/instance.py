"""An instance we asked a provider for, its lifecycle states and the transitions between them.

pending → provisioning → bootstrapping → ready → draining → terminated (+ failed); a machine the provider
shows stopped is held in ``stopped`` until it runs again (then bootstrapping). Every transition
returns the event that records it; the caller (the unit of work) stores the event with the instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class InstanceState(StrEnum):
    PENDING = "pending"  # intent stored, no provider instance known yet
    PROVISIONING = "provisioning"  # the provider has it; not running yet
    BOOTSTRAPPING = "bootstrapping"  # machine up; the server is starting
    READY = "ready"  # serving
    DRAINING = "draining"  # finishing its requests before deletion
    STOPPED = "stopped"  # stopped at the provider: kept (its disk may bill), neither serving nor counted
    TERMINATED = "terminated"
    FAILED = "failed"

    @property
    def is_live(self) -> bool:
        return self in LIVE

    @property
    def is_ended(self) -> bool:
        return self in ENDED


NOT_READY = frozenset({InstanceState.PENDING, InstanceState.PROVISIONING, InstanceState.BOOTSTRAPPING})
COUNTED = NOT_READY | {InstanceState.READY}  # toward the tier's current size
# Everything that may bill. A stopped machine is not counted toward its tier's size (the tier launches
# what it lacks) and garbage collection leaves it to its row.
LIVE = COUNTED | {InstanceState.DRAINING, InstanceState.STOPPED}


def is_counted(state: InstanceState, *, surge: bool) -> bool:
    """``Instance.counted`` from two of its facts (for rows read without building entities, grouped by state
    and surge): a member filling a warm pool counts here; only the sharded fleet budget's floors read this."""
    return state in COUNTED and not (surge and state is not InstanceState.READY)


ENDED = frozenset({InstanceState.TERMINATED, InstanceState.FAILED})
NOTICED = frozenset({InstanceState.PROVISIONING, InstanceState.BOOTSTRAPPING, InstanceState.READY})


@dataclass(frozen=True)
class InstanceEvent:
    """Something that happened to an instance or a tier, as the events table records it."""

    t: float
    tier: str | None
    key: str | None
    kind: str
    message: str


@dataclass(eq=False, slots=True)
class Instance:
    """One machine we asked for. The intent (with its key) is stored before the provider is called."""

    key: str
    tier: str
    state: InstanceState
    provider: str
    offer_id: str
    gpu: str
    region: str
    capacity: str  # providers.base.Capacity value
    price_per_hour: float
    created_at: float
    updated_at: float
    gpu_count: int = 1
    provider_id: str | None = None
    address: str | None = None
    reason: str = ""
    launched_at: float | None = None
    ready_at: float | None = None
    drain_started_at: float | None = None
    notice_at: float | None = None  # interruption warned (webhook)
    interrupted_at: float | None = None  # the reconciler saw the provider interrupt it (spot back-off)
    ended_at: float | None = None
    resumed_at: float | None = None  # last started again after a stop: its boot timeouts count from here
    interrupted: bool = False
    end_state: InstanceState = InstanceState.TERMINATED  # what retiring ends in
    surge: bool = False  # extra instance replacing a fallback one
    attempts: int = 0
    next_attempt_at: float | None = None
    cost: float = 0.0  # $ accounted when the instance ends
    server_hash: str | None = None  # the server description it was launched with (None: adopted from before)
    running_at: float | None = None  # the provider first reported the machine running
    # Stopped stretches bill the disk, not the GPU: the open one began at ``stopped_at``; ``stopped_s`` sums
    # the closed ones. ``storage_per_hour``: what the provider bills a stopped machine (0 where it publishes
    # no single figure: the ledger then undercounts a stopped stretch, and the stop event says so).
    stopped_at: float | None = None
    stopped_s: float = 0.0
    storage_per_hour: float = 0.0

    # ---- boot phases -----------------------------------------------------------------------------
    def boot_phases(self) -> dict[str, float | None]:
        """Seconds from the launch intent to the machine running (``provisioning``) and from running to a
        serving server (``bootstrapping``); None where not (yet) seen. A provider whose running means serving
        shows no separate bootstrapping phase: unknown, not zero."""
        provisioning = None if self.running_at is None else max(0.0, self.running_at - self.created_at)
        bootstrapping = None
        if self.running_at is not None and self.ready_at is not None and self.ready_at > self.running_at:
            bootstrapping = self.ready_at - self.running_at
        return {"provisioning": provisioning, "bootstrapping": bootstrapping}

    def _ready_message(self, reason: str, through_bootstrapping: bool) -> str:
        phases = self.boot_phases()
        total = None if self.ready_at is None else max(0.0, self.ready_at - self.created_at)
        parts = [f"create→serving {total:.0f}s"] if total is not None else []
        if phases["provisioning"] is not None:
            parts.append(f"create→running {phases['provisioning']:.0f}s")
        if through_bootstrapping and phases["bootstrapping"] is not None:
            parts.append(f"running→serving {phases['bootstrapping']:.0f}s")
        elif not through_bootstrapping:
            parts.append("running→serving not seen (the provider's running means serving)")
        return f"{reason} ({'; '.join(parts)})" if parts else reason

    # ---- facts -----------------------------------------------------------------------------------
    @property
    def counted(self) -> bool:
        """Counts toward the tier's size: not draining, not a surge that is not ready yet (a surge replaces a
        fallback instance; it only counts once it can take the other's place), and not filling the pool."""
        state = self.state  # is_counted, inline: the tick asks this of every instance several times
        if state not in COUNTED or (self.surge and state is not InstanceState.READY):
            return False
        return not (self.end_state is InstanceState.STOPPED and self.resumed_at is None)  # not filling the pool

    def cost_until(self, end: float) -> float:
        """Dollars billed from launch to ``end`` (per-second billing): the GPU price while it holds a GPU,
        the storage price over its stopped stretches."""
        start = self.launched_at if self.launched_at is not None else self.created_at
        stopped = self.stopped_seconds(end)
        running = max(0.0, end - start - stopped)
        return (running * self.price_per_hour + stopped * self.storage_per_hour) / 3600.0

    def stopped_seconds(self, end: float) -> float:
        """Seconds spent stopped up to ``end``: the closed stretches and the open one."""
        open_s = max(0.0, end - self.stopped_at) if self.stopped_at is not None else 0.0
        return self.stopped_s + open_s

    @property
    def billing_per_hour(self) -> float:
        """What it bills an hour now: its disk while stopped, else the GPU price."""
        return self.storage_per_hour if self.stopped_at is not None else self.price_per_hour

    @property
    def filling(self) -> bool:
        """Launched to fill its tier's warm pool (``end_state`` stopped from its intent on): it boots fully
        once, so its disk holds the image, the weights and the compile cache, and is then stopped into the
        pool. Neither counted toward its tier nor routed; a scale-out may take it as a live instance."""
        return self.end_state is InstanceState.STOPPED and self.resumed_at is None and self.state in COUNTED

    @property
    def pooled(self) -> bool:
        """A warm pool member: stopped by the reconciler (or held stopped on its way back) to be resumed."""
        return self.state is InstanceState.STOPPED and self.end_state is InstanceState.STOPPED

    # ---- transitions -----------------------------------------------------------------------------
    def move(self, state: InstanceState, now: float, reason: str, event: str | None) -> InstanceEvent | None:
        """Any state change (or a reason update when ``state`` is the current one). The ready event carries
        the boot's phases."""
        message = reason
        if state in (InstanceState.BOOTSTRAPPING, InstanceState.READY) and self.running_at is None:
            self.running_at = now  # the provider reports it running (for some providers that is serving)
        if state is InstanceState.READY and self.ready_at is None:
            self.ready_at = now
            message = self._ready_message(reason, self.state is InstanceState.BOOTSTRAPPING)
        if state is InstanceState.READY and self.end_state is InstanceState.STOPPED and self.resumed_at is not None:
            self.end_state = InstanceState.TERMINATED  # a pool member serving again is no longer one
        if state is InstanceState.STOPPED and self.stopped_at is None:
            self.stopped_at = now  # its disk bills from here, not the GPU
        elif state in COUNTED and self.stopped_at is not None:
            self.stopped_s += max(0.0, now - self.stopped_at)  # running again: the GPU bills
            self.stopped_at = None
        self.state, self.reason, self.updated_at = state, reason, now
        return self._event(now, event, message) if event else None

    def adopt(
        self, provider_id: str, now: float, *, created_at: float | None, address: str | None, price: float | None
    ) -> InstanceEvent:
        """The provider has an instance for our key: from now on we follow it."""
        self.provider_id = provider_id
        self.launched_at = self.launched_at or (created_at or now)
        self.address = address or self.address
        if price:
            self.price_per_hour = price
        self.next_attempt_at = None
        return self._moved(InstanceState.PROVISIONING, now, "launched", "launched")

    def mark_ready(self, now: float, reason: str) -> InstanceEvent:
        ready = InstanceState.READY.value
        return self._moved(InstanceState.READY, now, reason or ready, ready)

    def take_place(self, now: float, reason: str) -> InstanceEvent:
        """A ready surge becomes an ordinary member of its tier (the instance it replaced retires)."""
        self.surge = False
        self.updated_at = now
        return self._event(now, "handed-back", reason)

    def mark_interrupted(self, now: float) -> None:
        self.interrupted = True
        self.interrupted_at = now

    def start_draining(
        self,
        now: float,
        reason: str,
        *,
        interrupted: bool = False,
        end_state: InstanceState = InstanceState.TERMINATED,
        event: str | None = None,
    ) -> InstanceEvent:
        self.interrupted = self.interrupted or interrupted
        self.end_state = end_state
        self.drain_started_at = now
        return self._moved(InstanceState.DRAINING, now, reason, event or InstanceState.DRAINING.value)

    def end(self, state: InstanceState, now: float, reason: str, event: str) -> InstanceEvent:
        """Terminated or failed: the cost is accounted (nothing bills without a provider instance)."""
        self.ended_at = now
        self.cost = self.cost_until(now) if self.provider_id else 0.0
        return self._moved(state, now, reason, event)

    def retire(self, now: float) -> InstanceEvent:
        """Deleted after draining (or never created): ends in the state draining chose (terminated where it
        chose to be stopped: a deletion ends it all the same)."""
        state = self.end_state if self.end_state.is_ended else InstanceState.TERMINATED
        return self.end(state, now, self.reason, "retired")

    def _moved(self, state: InstanceState, now: float, reason: str, event: str) -> InstanceEvent:
        result = self.move(state, now, reason, event)
        assert result is not None
        return result

    def _event(self, now: float, kind: str, message: str) -> InstanceEvent:
        return InstanceEvent(now, self.tier, self.key, kind, message)
