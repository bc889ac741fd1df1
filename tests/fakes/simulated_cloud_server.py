"""The simulated cloud's HTTP server (``scalectl.providers.simulated.server``) in a thread on a free loopback port,
for tests and benchmarks that share one simulated cloud between several adapters or daemon processes."""

from __future__ import annotations

from typing import Any

from scalectl.providers.simulated import SimulatedCloud
from scalectl.providers.simulated.server import build_app, make_cloud
from tests.fakes import LoopbackServer


def start_simulated_cloud(**options: Any) -> tuple[SimulatedCloud, LoopbackServer]:
    """A started server over a new simulated cloud on the real clock (``options``: ``SimOptions`` fields).

    Returns the cloud (its controls: ``set_capacity``, ``interrupt``...) and the server (``.url``,
    ``.stop()``, or use it as a context manager). Touch the cloud only while no request is in flight:
    the server's thread owns it otherwise.
    """
    cloud = make_cloud(**options)
    return cloud, LoopbackServer(build_app(cloud)).start()
