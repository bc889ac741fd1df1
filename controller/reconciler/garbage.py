"""Phase 2, garbage collection by (key, provider id): an instance carrying our key prefix is garbage
unless it is the one a live row holds. That is an instance no live row explains (an ended row's machine
still there included), deleted at once, and a second instance under a live row's key (a create whose
answer was lost, repeated), deleted once it has been seen for longer than its provider's listing lag.
Nothing that bills may stay untracked."""

from __future__ import annotations

from collections.abc import Mapping

from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.controller.reconciler.sync import Listings
from scalectl.controller.reconciler.tick import Tick
from scalectl.controller.store.instances import LIVE_STATES
from scalectl.providers.base import InstanceStatus, Provider, ProviderInstance

# Listed instances that need nothing more. A FAILED one is not among them: a crashed server's machine or
# deployment record can still exist (and bill) at the provider until it is deleted.
ENDED = (InstanceStatus.TERMINATED, InstanceStatus.PREEMPTED)
# A duplicate waits this much longer than its provider's listing lag: by then every create of its key that
# could still be in flight has shown, and the row has adopted the one it keeps.
DUPLICATE_GRACE = 60.0

Found = tuple[str, ProviderInstance]  # provider name, listed instance


class Duplicates:
    """When each instance under a live row's key, other than the row's own, was first seen (in memory:
    after a restart the grace starts again, which only delays a delete)."""

    def __init__(self) -> None:
        self.first_seen: dict[tuple[str, str], float] = {}

    def due(self, found: list[Found], listed: Listings, providers: Mapping[str, Provider], now: float) -> list[Found]:
        """The duplicates seen for longer than their grace; forgets those a listing no longer shows as
        duplicates (a provider not listed this tick keeps its sightings)."""
        seen = {(name, inst.provider_id) for name, inst in found}
        self.first_seen = {k: t for k, t in self.first_seen.items() if k in seen or k[0] not in listed}
        due = []
        for name, inst in found:
            first = self.first_seen.setdefault((name, inst.provider_id), now)
            if now - first > providers[name].capabilities.listing_lag + DUPLICATE_GRACE:
                due.append((name, inst))
        return due


async def collect_garbage(
    tick: Tick,
    providers: Mapping[str, Provider],
    calls: Calls,
    seen: Listings,
    live_keys: set[str],
    duplicates: Duplicates,
) -> int:
    """Deletes the unexplained instances (``live_keys``: the keys of every live row, read before the
    listings) and the duplicates due; returns how many deletes succeeded."""
    unknown: list[Found] = []
    held: list[Found] = []  # under a live row's key
    for name, listing in seen.items():  # one pass over the listings (every instance of a large fleet)
        for inst in listing.values():
            if inst.key and inst.status not in ENDED:
                (held if inst.key in live_keys else unknown).append((name, inst))
    keys = [inst.key or "" for _, inst in unknown]
    stored = await tick.db.run(tick.uow.instances.stored_states, keys) if unknown else {}
    # A live row another daemon stored after `live_keys` was read (before its create) makes it no garbage.
    unknown = [(name, inst) for name, inst in unknown if stored.get(inst.key or "") not in LIVE_STATES]
    known_ended = set(stored)
    holds = await tick.db.run(tick.uow.instances.held_ids, [inst.key or "" for _, inst in held]) if held else {}
    # A row that holds no instance yet adopts one this tick or the next: nothing under its key is a duplicate.
    doubled = [(n, i) for n, i in held if holds.get(i.key or "") not in (None, i.provider_id)]
    due = duplicates.due(doubled, seen, providers, tick.now)
    doomed = [
        (n, i, "instance of an ended row" if i.key in known_ended else "orphan (no row knows it)") for n, i in unknown
    ]
    doomed += [(n, i, f"duplicate under a live row's key (the row holds {holds[i.key or '']})") for n, i in due]
    if not doomed:
        return 0
    results = await calls.gather(providers[n].delete(i.provider_id) for n, i, _ in doomed)
    deleted = 0
    for (name, inst, what), result in zip(doomed, results, strict=True):
        if isinstance(result, BaseException):
            tick.event(None, inst.key, "orphan-delete-failed", f"{name} {inst.provider_id}: {what}: {one_line(result)}")
            continue
        deleted += 1
        tick.event(None, inst.key, "orphan-deleted", f"{name} {inst.provider_id}: {what}")
    return deleted
