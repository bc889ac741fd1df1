"""The simulated cloud as a simulation run uses it: ``scalectl.providers.simulated.SimulatedCloud``, configured
through its public constructor.

Every instance gets an address (so the reconciler's graceful drain asks the fleet model how much work is
left, as it asks vLLM in production), and provisioning delays come from one stream per cloud in the order
instances are created (the controller's instance keys are random; the run's delays must not be).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import random
from typing import ClassVar

from scalectl.clocks import Clock
from scalectl.providers.base import ProviderCapabilities
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.providers.simulated.cloud import BootFor, ResumeFor
from scalectl.simulator.workloads.spec import CloudSpec

ADDRESS_SCHEME = "sim://"


class PhasedSimulatedCloud(SimulatedCloud):
    """A simulated cloud whose machines boot in two phases: running (the machine is up) and then serving
    (the server answers a readiness probe), as a real cloud's machines do, so the reconciler records both."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        SimulatedCloud.capabilities, running_means_ready=False
    )


def simulation_cloud(
    name: str,
    clock: Clock,
    spec: CloudSpec,
    seed: int,
    boot: BootFor | None = None,
    resume: ResumeFor | None = None,
) -> SimulatedCloud:
    """One provider of the run. ``boot``: each instance's boot drawn in parts (the boot model); None: the
    workload's uniform ``provision_delay``, create → serving in one phase. ``resume``: a stopped machine's
    start drawn likewise; None: the cloud's uniform resume delay."""
    if boot is None and spec.provision_delay is None:
        raise ValueError("a simulation cloud boots its instances by the boot model (`boot`) or `provision_delay`")
    low, high = spec.provision_delay if spec.provision_delay is not None else (0.0, 0.0)
    options = {
        "seed": seed,
        "provision_delay_min": low,
        "provision_delay_max": high,
        "interruption_notice": spec.notice,
        "spot_interruptions_per_hour": 0.0,  # interruptions come from the run's schedule (storms vary it)
        "storage_per_hour": spec.storage_per_hour,
        "resume_failure_rate": spec.resume_failure_rate,
    }
    kind = SimulatedCloud if boot is None else PhasedSimulatedCloud
    return kind(
        ProviderConfig(name=name, type="simulated", options=options),
        clock,
        draws=_InOrder(seed, name),
        address_of=functools.partial(address_of, name),
        boot=boot,
        resume=resume,
    )


class _InOrder:
    """One random stream per cloud, in the order instances are created: the same run draws the same delays."""

    def __init__(self, seed: int, cloud: str) -> None:
        self._seed, self._cloud = seed, cloud
        self._count = itertools.count(1)

    def __call__(self, _key: str) -> random.Random:
        digest = hashlib.sha256(f"{self._seed}:{self._cloud}:{next(self._count)}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))


def address_of(provider: str, provider_id: str) -> str:
    return f"{ADDRESS_SCHEME}{provider}/{provider_id}"
