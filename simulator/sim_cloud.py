"""The simulated cloud as a simulation run uses it: the provider the controller talks to, plus what the run
needs to know about it.

On top of ``providers.simulated.SimulatedCloud`` it gives every instance an address (so the reconciler's
graceful drain asks the fleet model how much work is left, as it asks vLLM in production), draws
provisioning delays from a per-run stream (the controller's instance keys are random; delays must not
be), and reports billing per tier over a window.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections import defaultdict

from clocks import Clock
from providers.base import ProviderInstance
from providers.registry import ProviderConfig
from providers.simulated import SimulatedCloud, _SimInstance
from simulator.workloads.spec import CloudSpec

ADDRESS_SCHEME = "sim://"


class SimulationCloud(SimulatedCloud):
    def __init__(self, name: str, clock: Clock, spec: CloudSpec, seed: int) -> None:
        low, high = spec.provision_delay
        options = {
            "seed": seed,
            "provision_delay_min": low,
            "provision_delay_max": high,
            "interruption_notice": spec.notice,
            "spot_interruptions_per_hour": 0.0,  # interruptions come from the run's schedule (storms vary it)
        }
        super().__init__(ProviderConfig(name=name, type="simulated", options=options), clock)
        self._draws = 0

    def _rng(self, key: str) -> random.Random:
        # One stream per cloud, in the order instances are created: the same run draws the same delays.
        self._draws += 1
        digest = hashlib.sha256(f"{self.options.seed}:{self.name}:{self._draws}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def _view(self, inst: _SimInstance) -> ProviderInstance:
        view = super()._view(inst)
        return dataclasses.replace(view, address=address_of(self.name, inst.provider_id))

    def billed_by_tier(self, t0: float, t1: float) -> dict[str, tuple[float, float]]:
        """Per tier, (dollars, instance-seconds) billed within [t0, t1]: every instance from create to
        delete (or preemption), provisioning included, clipped to the window."""
        out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        now = self.clock.now()
        for inst in (*self._instances.values(), *self._ended.values()):
            if not inst.tier:
                continue
            end = inst.ended_at if inst.ended_at is not None else now
            seconds = max(0.0, min(end, t1) - max(inst.created_at, t0))
            entry = out[inst.tier]
            entry[0] += seconds * inst.price_per_hour / 3600.0
            entry[1] += seconds
        return {tier: (v[0], v[1]) for tier, v in out.items()}


def address_of(provider: str, provider_id: str) -> str:
    return f"{ADDRESS_SCHEME}{provider}/{provider_id}"
