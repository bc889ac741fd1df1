"""Instance lifecycle: what a row becomes given what the provider says and how long it has waited.

pending → provisioning → bootstrapping → ready → draining → terminated (+ failed). Pure: takes a row's
facts and an observation, returns a transition; the loop applies it and writes the event.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.config import TierSpec
from controller.store.models import InstanceRecord
from providers.base import InstanceStatus, ProviderInstance


@dataclass(frozen=True)
class Transition:
    state: str  # new state (may equal the old one)
    reason: str
    event: str | None = None  # event kind to record, if anything happened
    interrupted: bool = False
    end_state: str | None = None  # for rows moved to draining: what deletion will end them in
    address: str | None = None


def cost_of(row: InstanceRecord, end: float) -> float:
    """Dollars a row billed from launch to ``end`` (per-second billing)."""
    start = row.launched_at if row.launched_at is not None else row.created_at
    return max(0.0, end - start) * row.price_per_hour / 3600.0


def observe(
    row: InstanceRecord,
    seen: ProviderInstance | None,
    gone: bool,
    tier: TierSpec | None,
    now: float,
    *,
    ready_on_running: bool,
) -> Transition | None:
    """The transition for a row with a provider id, given the provider's view (``seen``) or that it is
    confirmed gone (``gone``: not found). None: nothing to do this tick."""
    state = row.state
    if gone or (seen is not None and seen.status.is_gone):
        if state == "draining":
            return Transition(row.end_state or "terminated", "gone at the provider while draining", "ended")
        status = seen.status if seen is not None else None
        if status is InstanceStatus.PREEMPTED or (row.capacity == "spot" and state == "ready"):
            return Transition("terminated", "preempted by the provider", "interrupted", interrupted=True)
        what = status.value if status is not None else "not found"
        return Transition("failed", f"instance {what} at the provider", "lost")
    if seen is None:
        return None  # the provider could not be asked this tick: no news is no change
    if seen.interruption_notice_at is not None and state in ("provisioning", "bootstrapping", "ready"):
        return Transition(
            "draining",
            "interruption notice from the provider",
            "interruption-notice",
            interrupted=True,
            end_state="terminated",
            address=seen.address,
        )
    if state == "provisioning":
        if seen.status is InstanceStatus.RUNNING:
            if ready_on_running:
                return Transition("ready", "running", "ready", address=seen.address)
            return Transition("bootstrapping", "machine up; waiting for the server", "booted", address=seen.address)
        if tier is not None and now - (row.launched_at or row.created_at) > tier.launch_timeout:
            return Transition(
                "draining",
                f"not running after launch timeout {tier.launch_timeout:g}s",
                "launch-timeout",
                end_state="failed",
            )
        return None
    if state == "bootstrapping":
        if tier is not None and now - (row.launched_at or row.created_at) > tier.bootstrap_timeout:
            return Transition(
                "draining",
                f"not serving after bootstrap timeout {tier.bootstrap_timeout:g}s",
                "bootstrap-timeout",
                end_state="failed",
            )
        if seen.address and seen.address != row.address:
            return Transition("bootstrapping", row.reason, address=seen.address)
    return None


def pending_expired(row: InstanceRecord, tier: TierSpec | None, now: float) -> bool:
    """A create that never produced an instance within the launch timeout is abandoned."""
    timeout = tier.launch_timeout if tier is not None else 300.0
    return now - row.created_at > timeout
