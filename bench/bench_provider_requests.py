"""Provider API requests per 15 minutes of idle tiers: the real reconciler, the real adapters (httpx,
retries, pagination, request budgets) and the local API servers of tests/fakes, on a fake clock.

For each provider and for 1 and 20 idle tiers (min 0, no demand: nothing to create or delete) the
daemon ticks every 5 s for 15 simulated minutes. Printed: requests the local server received, requests
our budget kept back (not sent), the 429s the server answered, and the provider's documented limit.
The account holds ``--old`` instances made long ago (default 1,000), which a listing must page past.

From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_provider_requests.py [--old 1000] [--tiers 1 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.migrate import upgrade
from scalectl.controller.store.repository import Store
from scalectl.providers.base import Provider
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config
from tests.fakes import LoopbackServer
from tests.fakes.lambda_server import API_KEY as LAMBDA_KEY
from tests.fakes.lambda_server import SSH_KEY_NAME, FakeLambda
from tests.fakes.runpod_server import RunPodFake
from tests.fakes.spheron_server import API_KEY as SPHERON_KEY
from tests.fakes.spheron_server import SSH_KEY_ID, TEAM_ID, FakeSpheron
from tests.fakes.vastai_server import VastFake

TICK = 5.0
WINDOW = 900.0  # 15 minutes
GPUS = ("H100-SXM5-80GB", "A100-80GB-PCIe", "RTX4090-24GB", "L40S-48GB")  # tiers cycle through these


@dataclass
class Backend:
    name: str
    documented: str
    config: ProviderConfig
    calls: Callable[[], int]
    throttled: Callable[[], int]  # 429s the server answered


def _tiers(count: int, config: ProviderConfig) -> str:
    provider = config.name
    entry = {"type": config.type, "options": dict(config.options)}
    lines = [yaml.safe_dump({"providers": {provider: entry}}).rstrip(), "tiers:"]
    for i in range(count):
        lines += [
            f"  idle-{i:02d}:",
            "    capacity: spot",
            "    fallback: on-demand",
            f"    gpu: {GPUS[i % len(GPUS)]}",
            f"    providers: [{provider}]",
            "    min: 0",
            "    max: 4",
            "    policy: {kind: min-floor, floor: 0}",
        ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def backend(kind: str, clock: FakeClock, old: int) -> Iterator[Backend]:
    if kind == "spheron":
        sp = FakeSpheron(clock, rate_limit=(250, WINDOW), create_limit=(10, WINDOW))
        sp.seed_old(old)
        os.environ["SCALECTL_SPHERON_API_KEY"] = SPHERON_KEY
        with LoopbackServer(sp.app) as server:
            options = {"team_id": TEAM_ID, "ssh_key_id": SSH_KEY_ID}
            yield Backend(
                "spheron",
                "100-250 / 15 min / IP; 10 creates / 15 min",
                ProviderConfig("spheron", "spheron", base_url=server.url, options=options),
                lambda: sp.calls,
                lambda: sp.rate_limit.refused if sp.rate_limit else 0,
            )
    elif kind == "runpod":
        rp = RunPodFake(quota=(600, 60.0), clock=clock)  # RunPod publishes no numbers: an assumed quota
        rp.seed_old(old)
        os.environ["SCALECTL_BENCH_RUNPOD_KEY"] = rp.api_key
        with LoopbackServer(rp.app()) as server:
            options = {"default_image": "vllm/vllm-openai:v0.8.5"}
            config = ProviderConfig("runpod", "runpod", server.url, "SCALECTL_BENCH_RUNPOD_KEY", options=options)
            refused = rp._window.refused if rp._window else 0
            yield Backend(
                "runpod",
                "per user per minute/hour/day, via RateLimit headers",
                config,
                lambda: rp.calls,
                lambda: (rp._window.refused if rp._window else 0) - refused,
            )
    elif kind == "lambda":
        lf = FakeLambda(clock)
        os.environ["SCALECTL_LAMBDA_API_KEY"] = LAMBDA_KEY
        with LoopbackServer(lf.app) as server:
            options = {"ssh_key_name": SSH_KEY_NAME}
            yield Backend(
                "lambda",
                "1 request / s; 1 launch / 12 s",
                ProviderConfig("lambda", "lambda", base_url=f"{server.url}/api/v1", options=options),
                lambda: lf.calls,
                lambda: lf.throttled,
            )
    elif kind == "vastai":
        vf = VastFake()
        vf.seed_old(old)
        os.environ["SCALECTL_BENCH_VAST_KEY"] = vf.api_key
        with LoopbackServer(vf.app()) as server:
            options = {"default_image": "vllm/vllm-openai:v0.8.5"}
            config = ProviderConfig("vastai", "vastai", server.url, "SCALECTL_BENCH_VAST_KEY", options=options)
            yield Backend(
                "vastai", "per endpoint minimum interval (numbers unpublished)", config, lambda: vf.calls, lambda: 0
            )
    else:
        raise ValueError(kind)


async def run(kind: str, tiers: int, old: int) -> dict[str, Any]:
    clock = FakeClock()
    with backend(kind, clock, old) as b, tempfile.TemporaryDirectory() as tmp:
        provider: Provider = build_provider(b.config, clock)
        engine = make_engine(f"sqlite:///{tmp}/bench.db")
        upgrade(engine)
        store = Store(engine)
        text = _tiers(tiers, b.config)
        store.config.apply(parse_config(text, "bench"), text, "bench", clock.now())
        reconciler = Reconciler(store, {b.config.name: provider}, StaticSignals(clock), clock)
        budgets = getattr(getattr(provider, "api", None) or getattr(provider, "_http", None), "budgets", ())
        await reconciler.tick()  # warm-up: first offers and listing
        start_calls, start_429 = b.calls(), b.throttled()
        start_refused = sum(x.refused for x in budgets)
        end = clock.now() + WINDOW
        ticks = errors = 0
        while clock.now() < end:  # budgets and pacers sleep on this clock too: time is what bounds it
            clock.advance(TICK)
            report = await reconciler.tick()
            ticks += 1
            errors += bool(report.provider_errors)
        result = {
            "provider": kind,
            "tiers": tiers,
            "ticks": ticks,
            "requests": b.calls() - start_calls,
            "kept_back": sum(x.refused for x in budgets) - start_refused,
            "429s": b.throttled() - start_429,
            "ticks_with_provider_errors": errors,
            "documented": b.documented,
        }
        await provider.aclose()
        engine.dispose()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=int, default=1_000, help="old instances already in the account")
    parser.add_argument("--tiers", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--providers", nargs="+", default=["spheron", "runpod", "lambda", "vastai"])
    args = parser.parse_args()
    print(f"idle tiers, {TICK:g} s tick, 15 simulated minutes, {args.old} old instances in each account")
    print(
        f"{'provider':<9} {'tiers':>5} {'requests/15min':>15} {'kept back':>10} {'429s':>5} "
        f"{'ticks w/ errors':>16}  documented limit"
    )
    for kind in args.providers:
        for tiers in args.tiers:
            r = asyncio.run(run(kind, tiers, args.old))
            print(
                f"{r['provider']:<9} {r['tiers']:>5} {r['requests']:>15} {r['kept_back']:>10} {r['429s']:>5} "
                f"{r['ticks_with_provider_errors']:>10}/{r['ticks']:<5}  {r['documented']}"
            )


if __name__ == "__main__":
    main()
