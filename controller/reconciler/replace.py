"""Replacements, pure: instances under an interruption notice that no newer instance has replaced yet,
the offers a replacement should avoid, and fallback instances whose spot replacement is ready.

Level-triggered: derived from the tier's live instances alone, so a restart resumes where it left off."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scalectl.domain.instance import Instance, InstanceState
from scalectl.providers.base import Capacity

OfferKey = tuple[str, str, str]  # (provider, offer id, capacity)


def noticed(instances: Sequence[Instance]) -> list[Instance]:
    """Instances draining because their provider warned it will take them back."""
    return [i for i in instances if i.state is InstanceState.DRAINING and i.interrupted]


def unreplaced_notices(instances: Sequence[Instance]) -> list[Instance]:
    """Warned instances with no replacement yet. A replacement is a counted instance created at or after
    the warned one began draining; each replaces one warned instance, oldest warning first."""
    warned = sorted(noticed(instances), key=lambda i: i.drain_started_at or i.updated_at)
    if not warned:  # the usual case: nothing to match, and the tick asks for every tier
        return []
    newer = sorted((i.created_at for i in instances if i.counted), reverse=True)
    unreplaced: list[Instance] = []
    for inst in reversed(warned):  # the newest warnings take the newest instances
        since = inst.drain_started_at or inst.updated_at
        if newer and newer[0] >= since:
            newer.pop(0)
        else:
            unreplaced.append(inst)
    return unreplaced


def offers_to_avoid(instances: Sequence[Instance]) -> frozenset[OfferKey]:
    """Where warned instances run: the capacity there is being taken back, so place elsewhere if possible."""
    return frozenset((i.provider, i.offer_id, i.capacity) for i in noticed(instances))


@dataclass(frozen=True)
class HandBack:
    """A ready spot instance that was launched to replace ``fallback`` (None: nothing left to replace)."""

    surge: Instance
    fallback: Instance | None


def hand_backs(
    instances: Sequence[Instance], current_hash: str | None = None, *, spot_fallback: bool = True
) -> list[HandBack]:
    """Each ready surge takes the place of one instance it was launched to replace: the oldest drifted one
    (a rollout: it runs another server than ``current_hash``), else — on a spot tier with an on-demand
    fallback — the costliest ready on-demand instance (a hand-back to spot). That instance retires; with
    nothing left to replace, the surge simply joins the tier."""
    ready = InstanceState.READY
    surges = sorted((i for i in instances if i.surge and i.state is ready), key=lambda i: i.created_at)
    if not surges:  # the usual case: nothing hands back, and the tick asks for every tier
        return []
    old = [
        i
        for i in sorted(instances, key=lambda i: i.created_at)
        if i.state is ready and not i.surge and current_hash and i.server_hash not in (None, current_hash)
    ]
    fallbacks = sorted(
        (
            i
            for i in instances
            if spot_fallback
            and i.state is ready
            and not i.surge
            and i.capacity == Capacity.ON_DEMAND.value
            and i not in old
        ),
        key=lambda i: (-i.price_per_hour, -i.created_at),
    )
    replaceable = old + fallbacks
    return [HandBack(surge, replaceable.pop(0) if replaceable else None) for surge in surges]
