"""How long a spot tier takes to hand its on-demand fallbacks back to spot once spot returns.

    python bench/bench_hand_back.py [--instances 10] [--boot 180] [--tick 5] [--max-disrupted 25%]

The real reconciler on a fake clock, in-memory SQLite and the simulated cloud: spot has no capacity, the
tier comes up on on-demand fallbacks; then spot returns (and is cheaper) and the bench ticks until every
ready instance is spot and nothing else bills. Prints the minutes from spot's return, the most instances
billed at once, and how many spot instances were being started at once at most.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import yaml
from sqlalchemy import select

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base, InstanceRecord
from scalectl.controller.store.repository import Store
from scalectl.policies.types import Bounds, Decision, PolicyInput
from scalectl.providers.base import Capacity
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config

GPU = "H100-SXM5-80GB"


class Hold:
    """A policy that asks for ``want`` until told otherwise (then holds what it sees)."""

    def __init__(self, want: int) -> None:
        self.want: int | None = want

    def __call__(self, spec: Any, inp: PolicyInput, bounds: Bounds, external: Any) -> Decision:
        desired = self.want if self.want is not None else inp.current
        return Decision(desired=desired, reason="bench", state=inp.state)


async def run(instances: int, boot: float, tick: float, max_disrupted: str | None) -> None:
    clock = FakeClock()
    options = {"provision_delay_min": boot, "provision_delay_max": boot}
    cloud = SimulatedCloud(ProviderConfig(name="simulated", type="simulated", options=options), clock)
    spec: dict[str, Any] = {
        "capacity": "spot", "fallback": "on-demand", "gpu": GPU, "providers": ["simulated"],
        "min": 0, "max": instances * 2, "policy": {"kind": "scale-to-zero"},
    }  # fmt: skip
    if max_disrupted is not None:
        spec["max_disrupted"] = max_disrupted
    text = yaml.safe_dump({"tiers": {"batch": spec}})
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    store = Store(engine)
    store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", clock.now())
    policy = Hold(instances)
    reconciler = Reconciler(store, {"simulated": cloud}, StaticSignals(clock), clock, policy=PolicyRunner(policy))

    def rows() -> list[InstanceRecord]:
        with store.sessions() as s:
            return list(s.scalars(select(InstanceRecord)).all())

    cloud.set_capacity(GPU, 0, capacity=Capacity.SPOT)
    while sum(1 for r in rows() if r.state == "ready") < instances:
        await reconciler.tick()
        clock.advance(tick)
    policy.want = None  # from now on the policy holds what it is shown
    cloud.set_capacity(GPU, 1000, capacity=Capacity.SPOT)
    clock.advance(200)  # the offers cache refreshes: spot is back
    back_at, peak, starting = clock.now(), 0, 0
    while clock.now() - back_at < 4 * 3600:
        await reconciler.tick()
        live = [i for i in await cloud.list("sc-") if not i.status.is_gone]
        peak = max(peak, len(live))
        now_rows = rows()
        starting = max(starting, sum(1 for r in now_rows if r.state in ("pending", "provisioning", "bootstrapping")))
        ready = [r for r in now_rows if r.state == "ready"]
        if len(ready) == instances and all(r.capacity == "spot" for r in ready) and len(live) == instances:
            break
        clock.advance(tick)
    else:
        print(f"not handed back within 4 h (peak {peak})")
        return
    minutes = (clock.now() - back_at) / 60
    print(
        f"instances={instances} boot={boot:g}s tick={tick:g}s max_disrupted={max_disrupted or 'default'}: "
        f"handed back in {minutes:.1f} min; peak billed {peak}; spot starting at once {starting}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=10)
    parser.add_argument("--boot", type=float, default=180.0, help="seconds from create to serving")
    parser.add_argument("--tick", type=float, default=5.0)
    parser.add_argument("--max-disrupted", default=None)
    args = parser.parse_args()
    asyncio.run(run(args.instances, args.boot, args.tick, args.max_disrupted))


if __name__ == "__main__":
    main()
