"""Phase 2, garbage collection: instances carrying our key prefix that no live instance explains are
deleted (an ended row whose machine is still there included). Nothing that bills may stay untracked."""

from __future__ import annotations

from collections.abc import Mapping

from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.controller.reconciler.sync import Listings
from scalectl.controller.reconciler.tick import Tick
from scalectl.controller.store.instances import LIVE_STATES
from scalectl.providers.base import InstanceStatus, Provider

# Listed instances that need nothing more. A FAILED one is not among them: a crashed server's machine or
# deployment record can still exist (and bill) at the provider until it is deleted.
ENDED = (InstanceStatus.TERMINATED, InstanceStatus.PREEMPTED)


async def collect_garbage(
    tick: Tick, providers: Mapping[str, Provider], calls: Calls, seen: Listings, live_keys: set[str]
) -> int:
    """Deletes the unexplained instances (``live_keys``: the keys of every live row, read before the
    listings); returns how many deletes succeeded."""
    unknown = [
        (name, inst)
        for name, listing in seen.items()
        for inst in listing.values()
        if inst.key and inst.key not in live_keys and inst.status not in ENDED
    ]
    if not unknown:
        return 0
    stored = await tick.db.run(tick.uow.instances.stored_states, [inst.key or "" for _, inst in unknown])
    # A live row another daemon stored after `live_keys` was read (before its create) makes it no garbage.
    unknown = [(name, inst) for name, inst in unknown if stored.get(inst.key or "") not in LIVE_STATES]
    if not unknown:
        return 0
    known_ended = set(stored)
    results = await calls.gather(providers[n].delete(i.provider_id) for n, i in unknown)
    deleted = 0
    for (name, inst), result in zip(unknown, results, strict=True):
        what = "instance of an ended row" if inst.key in known_ended else "orphan (no row knows it)"
        if isinstance(result, BaseException):
            tick.event(None, inst.key, "orphan-delete-failed", f"{name} {inst.provider_id}: {what}: {one_line(result)}")
            continue
        deleted += 1
        tick.event(None, inst.key, "orphan-deleted", f"{name} {inst.provider_id}: {what}")
    return deleted
