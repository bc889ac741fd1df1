"""Instance lifecycle: what an instance becomes given what the provider says and how long it has waited.

Pure: takes an instance's facts and an observation, returns a transition; the sync phase applies it.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalectl.domain.instance import NOTICED, Instance, InstanceState
from scalectl.providers.base import InstanceStatus, ProviderInstance
from scalectl.tiers.config import TierSpec

S = InstanceState


@dataclass(frozen=True)
class Transition:
    state: InstanceState  # new state (may equal the old one)
    reason: str
    event: str | None = None  # event kind to record, if anything happened
    interrupted: bool = False
    end_state: InstanceState | None = None  # for instances moved to draining: what deletion ends them in
    address: str | None = None
    resumed: bool = False  # started again after a stop: its boot timeouts count from now


def observe(
    row: Instance,
    seen: ProviderInstance | None,
    gone: bool,
    tier: TierSpec | None,
    now: float,
    *,
    ready_on_running: bool,
) -> Transition | None:
    """The transition for an instance with a provider id, given the provider's view (``seen``) or that it is
    confirmed gone (``gone``: not found). None: nothing to do this tick."""
    state = row.state
    if gone or (seen is not None and seen.status.is_gone):
        if state is S.DRAINING:
            end = row.end_state if row.end_state.is_ended else S.TERMINATED  # bound for the pool: gone all the same
            return Transition(end, "gone at the provider while draining", "ended")
        status = seen.status if seen is not None else None
        if status is InstanceStatus.PREEMPTED or (row.capacity == "spot" and state is S.READY):
            return Transition(S.TERMINATED, "preempted by the provider", "interrupted", interrupted=True)
        what = status.value if status is not None else "not found"
        return Transition(S.FAILED, f"instance {what} at the provider", "lost")
    if seen is None:
        return None  # the provider could not be asked this tick: no news is no change
    if seen.status is InstanceStatus.STOPPED:
        if state in (S.PROVISIONING, S.BOOTSTRAPPING, S.READY):
            return Transition(S.STOPPED, "stopped at the provider: not serving, kept until started", "stopped")
        return None  # stopped already, or draining (deleted all the same)
    if state is S.STOPPED:
        if seen.status in (InstanceStatus.PENDING, InstanceStatus.RUNNING):
            # started again: it boots like a new machine, its timeouts counted from now (``move`` stamps it)
            return Transition(S.PROVISIONING, f"started again ({seen.status.value})", "resumed", resumed=True)
        return None  # UNKNOWN, STOPPING: no news
    pool = tier.warm_pool if tier is not None else None
    resuming = row.resumed_at is not None and state in (S.PROVISIONING, S.BOOTSTRAPPING)
    if pool is not None and resuming and now - (row.resumed_at or now) > pool.resume_timeout:
        return Transition(
            S.DRAINING,
            f"not serving {pool.resume_timeout:g}s after its start from the warm pool",
            "resume-timeout",
            end_state=S.FAILED,
        )
    if seen.interruption_notice_at is not None and state in NOTICED:
        return Transition(
            S.DRAINING,
            "interruption notice from the provider",
            "interruption-notice",
            interrupted=True,
            end_state=S.TERMINATED,
            address=seen.address,
        )
    if state is S.PROVISIONING:
        if seen.status is InstanceStatus.RUNNING:
            if ready_on_running:
                return Transition(S.READY, "running", S.READY.value, address=seen.address)
            return Transition(S.BOOTSTRAPPING, "machine up; waiting for the server", "booted", address=seen.address)
        if tier is not None and now - _began(row) > tier.launch_timeout:
            return Transition(
                S.DRAINING,
                f"not running after launch timeout {tier.launch_timeout:g}s",
                "launch-timeout",
                end_state=S.FAILED,
            )
        return None
    if state is S.BOOTSTRAPPING:
        if tier is not None and now - _began(row) > tier.bootstrap_timeout:
            return Transition(
                S.DRAINING,
                f"not serving after bootstrap timeout {tier.bootstrap_timeout:g}s",
                "bootstrap-timeout",
                end_state=S.FAILED,
            )
        if seen.address and seen.address != row.address:
            return Transition(S.BOOTSTRAPPING, row.reason, address=seen.address)
    return None


def _began(row: Instance) -> float:
    """When the machine's current boot began: its launch, or its last start after a stop."""
    launched = row.launched_at or row.created_at
    return max(launched, row.resumed_at) if row.resumed_at is not None else launched


def pending_expired(row: Instance, tier: TierSpec | None, now: float) -> bool:
    """A create that never produced an instance within the launch timeout is abandoned, but not while it
    waits to be asked again: a create whose outcome is unknown waits out its provider's listing lag
    (``next_attempt_at``), and ending it sooner would launch a second machine beside the one it may have made."""
    timeout = tier.launch_timeout if tier is not None else 300.0
    return now - row.created_at > timeout and now >= (row.next_attempt_at or 0.0)
