"""The simulated cloud: offers at seed prices, capacity limits, provisioning delay on the injected clock,
spot interruptions with a notice, per-second billing, and faults on demand.

It is the default provider (embedded run, tests, simulator). With ``options.state_path`` its state lives
in a JSON file, written atomically after every change, so it outlives a daemon that is killed: like a
real cloud, an instance created before a crash is still there (and still billing) after it.

The package: ``options.py``, ``machines.py`` (the books: live and ended machines, capacity pools, the
timeline, billing, the state file) and ``cloud.py`` (the provider and its controls).
"""

from scalectl.providers.simulated.cloud import SimulatedCloud
from scalectl.providers.simulated.options import DEFAULT_REGIONS, SimOptions

__all__ = ["DEFAULT_REGIONS", "SimOptions", "SimulatedCloud"]
