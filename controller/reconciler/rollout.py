"""Rolling replacement, pure: instances launched with another server description (a changed model, image,
vLLM flag, or `scalectl rollout restart`) have drifted; one step at a time replaces them.

Surge first: a new instance starts beside the fleet (at most ``max_surge`` at once, default 1) and, once
ready, takes a drifted instance's place — that one drains and retires — so ready capacity never drops below
what the policy needs. At ``max`` (or ``max_surge: 0``) a drifted instance drains first, at most
``max_disrupted`` at once. A paused rollout, or one whose new instances failed, takes no step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scalectl.domain.instance import Instance, InstanceState
from scalectl.domain.rollout import RolloutControl

__all__ = ["RolloutControl", "RolloutView", "drifted", "voluntary_disruptions"]


@dataclass(frozen=True)
class RolloutView:
    """What this tick knows of a tier's rollout."""

    current_hash: str
    paused: bool = False
    stopped: str | None = None  # why new instances are not started (a new one failed), or None


def drifted(instances: Sequence[Instance], current_hash: str) -> list[Instance]:
    """Counted instances launched with another server (oldest first). Rows from before hashes were kept
    (``server_hash`` None) are taken as current: nothing says otherwise, and replacing a whole fleet on an
    upgrade would be a surprise."""
    found = [i for i in instances if i.server_hash is not None and i.server_hash != current_hash and i.counted]
    return sorted(found, key=lambda i: i.created_at)


def voluntary_disruptions(instances: Sequence[Instance]) -> int:
    """Instances draining by our choice (scale-in, hand-back, rollout), not because a provider warned."""
    return sum(
        1 for i in instances if i.state is InstanceState.DRAINING and not i.interrupted and i.stopped_at is None
    )  # a stopped pool member being deleted serves nobody: no disruption
