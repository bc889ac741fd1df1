"""Each tick's view of a tier's rollout: the server its instances should run (its hash, cached while the
configuration and the generation stay), whether `scalectl rollout pause` holds it, and whether it stopped
because an instance on the new server failed."""

from __future__ import annotations

from collections.abc import Sequence

from scalectl.controller.reconciler.record import Recorder
from scalectl.controller.reconciler.rollout import RolloutView, drifted
from scalectl.controller.reconciler.tick import Tick
from scalectl.controller.store.repository import Store
from scalectl.domain.instance import Instance
from scalectl.tiers.config import TierSpec
from scalectl.tiers.server import server_hash

ROLLOUT_STOPPED = "rollout-stopped"


class Rollouts:
    def __init__(self, store: Store, recorder: Recorder) -> None:
        self.store = store
        self.recorder = recorder
        self._hashes: dict[str, tuple[TierSpec, int, str]] = {}  # tier -> (spec, generation, hash)

    def view(self, tick: Tick, name: str, tier: TierSpec, instances: Sequence[Instance]) -> RolloutView:
        control = tick.rollout_controls.get(name)
        generation = control.generation if control else 0
        cached = self._hashes.get(name)
        if cached is None or cached[0] is not tier or cached[1] != generation:
            cached = self._hashes[name] = (tier, generation, server_hash(tier, generation))
        current = cached[2]
        tick.server_hashes[name] = current
        stopped = None
        if drifted(instances, current):
            failed = self.store.rollouts.failed_with_server(name, current)
            if failed is not None:
                stopped = (
                    f"rollout stopped: {failed} on the new server failed ({len(drifted(instances, current))} "
                    "instances keep the old one); fix the tier and apply it, or `scalectl rollout restart`"
                )
                self.recorder.note(tick, name, ROLLOUT_STOPPED, stopped)
        return RolloutView(current, paused=bool(control and control.paused), stopped=stopped)
