"""Creates through a faulty network: the real reconciler (fake clock, in-memory store) drives a real
adapter over loopback HTTP, through ``FaultProxy``, to a local provider API whose listing (and, with
``get_lag``, its get-by-id) lags behind its creates. Shared by ``tests/integration/test_create_faults.py``
and ``bench/bench_faults.py``.

``run_scenario`` ticks until the tier holds ``want`` instances, each row holding one machine and no
machine of ours untracked, then a while longer (a late duplicate or a wrong delete shows up then), and
reports what the provider saw: creates it received, machines it made, duplicates, leaks, deletes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from scalectl.clocks import FakeClock
from scalectl.controller.call_deadline import DeadlineProvider
from scalectl.controller.provider_proxy import as_provider
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.providers.base import Provider
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml
from tests.fakes import LoopbackServer
from tests.fakes.fault_proxy import FaultProxy, ProxyFault
from tests.fakes.runpod_server import RunPodFake
from tests.fakes.spheron_server import API_KEY, SSH_KEY_ID, TEAM_ID, FakeSpheron
from tests.fakes.vastai_server import VastFake

PREFIX = "sc-"
STEP = 5.0  # seconds of fake time between ticks
AFTER = 40  # ticks run after convergence: 200 s, past the duplicate grace of every adapter


@dataclass(frozen=True)
class Outcome:
    adapter: str
    fault: str
    lag: float
    want: int
    creates: int  # create requests the provider received
    made: int  # machines the provider made
    duplicates: int  # machines made beyond the first under each key
    leaked: int  # machines of ours still there that no live row holds, at the end
    deleted: int  # delete requests the provider received
    converged_at: float | None  # seconds of fake time to the first converged tick; None: never
    rows: int  # live rows at the end


@dataclass
class Account:
    """One provider account behind the proxy: what the reconciler is given, and what the fake holds."""

    name: str
    gpu: str
    config: ProviderConfig
    create_path: tuple[str, str]  # (method, path prefix) of a create request
    made: Callable[[], list[str]]  # the key of every machine made, in order
    live: Callable[[], dict[str, str]]  # provider id -> key of our machines that bill now
    boot: Callable[[], None]  # machines made so far finish booting
    get_path: str = ""  # path prefix of a get-by-id (``FaultProxy`` rules), not matching the listing's


@contextlib.contextmanager
def spheron(
    clock: FakeClock, lag: float, monkeypatch: pytest.MonkeyPatch, get_lag: float = 0.0
) -> Iterator[tuple[Account, FaultProxy]]:
    fake = FakeSpheron(clock, minimum_runtime_minutes=0, listing_lag=lag, get_lag=get_lag)
    with LoopbackServer(fake.app) as server, FaultProxy(server.url) as proxy:
        monkeypatch.setenv("SCALECTL_SPHERON_API_KEY", API_KEY)
        # The documented defaults otherwise: 30 s timeout, 4 attempts, 100 requests and 10 creates per 15 min.
        options = {"team_id": TEAM_ID, "ssh_key_id": SSH_KEY_ID}
        config = ProviderConfig(name="spheron", type="spheron", base_url=proxy.url, options=options)

        def made() -> list[str]:
            with fake.lock:
                return [str(d["name"]) for d in fake.deployments.values()]

        def live() -> dict[str, str]:
            return {d["id"]: str(d["name"]) for d in fake.live() if str(d["name"]).startswith(PREFIX)}

        def boot() -> None:
            with fake.lock:
                for d in fake.deployments.values():
                    if d["status"] == "deploying":
                        d["status"] = "running"

        create = ("POST", "/api/deployments")
        yield Account("spheron", "H100-SXM5-80GB", config, create, made, live, boot, "/api/deployments/"), proxy


@contextlib.contextmanager
def runpod(
    clock: FakeClock, lag: float, monkeypatch: pytest.MonkeyPatch, get_lag: float = 0.0
) -> Iterator[tuple[Account, FaultProxy]]:
    fake = RunPodFake(clock=clock, listing_lag=lag, get_lag=get_lag)
    names: list[str] = []
    original = fake._new_pod

    def recording_new_pod(name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        names.append(name)
        return original(name, *args, **kwargs)

    fake._new_pod = recording_new_pod  # type: ignore[method-assign]
    with LoopbackServer(fake.app()) as server, FaultProxy(server.url) as proxy:
        monkeypatch.setenv("SCALECTL_RUNPOD_API_KEY", fake.api_key)
        options = {"default_image": "vllm/vllm-openai:v0.8.5"}
        config = ProviderConfig(name="runpod", type="runpod", base_url=proxy.url, options=options)

        def live() -> dict[str, str]:
            pods = list(fake.pods.values())
            return {p["id"]: str(p["name"]) for p in pods if str(p["name"]).startswith(PREFIX)}

        def boot() -> None:
            for pod in list(fake.pods.values()):
                if pod["status"] == "PROVISIONING":
                    fake.make_running(pod["id"])

        create = ("POST", "/v2/pods")
        yield Account("runpod", "L40S-48GB", config, create, lambda: list(names), live, boot, "/v2/pods/"), proxy


@contextlib.contextmanager
def vastai(
    clock: FakeClock, lag: float, monkeypatch: pytest.MonkeyPatch, get_lag: float = 0.0
) -> Iterator[tuple[Account, FaultProxy]]:
    fake = VastFake(clock=clock, listing_lag=lag, get_lag=get_lag)
    with LoopbackServer(fake.app()) as server, FaultProxy(server.url) as proxy:
        monkeypatch.setenv("SCALECTL_VASTAI_API_KEY", fake.api_key)
        options = {"default_image": "vllm/vllm-openai:v0.8.5"}
        config = ProviderConfig(name="vastai", type="vastai", base_url=proxy.url, options=options)

        def made() -> list[str]:
            return [str(key) for key in labels]

        def live() -> dict[str, str]:
            rows = list(fake.instances.values())
            return {str(r["id"]): str(r["label"]) for r in rows if str(r["label"]).startswith(PREFIX)}

        def boot() -> None:
            for row in list(fake.instances.values()):
                if row["actual_status"] is None:
                    fake.make_running(str(row["id"]))

        labels: list[str] = []
        original = fake._new_instance

        def recording_new_instance(machine: dict[str, Any], body: dict[str, Any], price: Any) -> dict[str, Any]:
            labels.append(str(body.get("label")))
            return original(machine, body, price)

        fake._new_instance = recording_new_instance  # type: ignore[method-assign]
        create = ("PUT", "/api/v0/asks/")
        yield Account("vastai", "H100-SXM5-80GB", config, create, made, live, boot, "/api/v0/instances/"), proxy


ACCOUNTS = {"spheron": spheron, "runpod": runpod, "vastai": vastai}


def held(store: Store) -> dict[str, str | None]:
    """Live row key -> the provider id it holds."""
    with store.unit_of_work() as uow:
        return {i.key: i.provider_id for i in uow.instances.live()}


async def run_scenario(
    adapter: str,
    fault: ProxyFault | None,
    lag: float,
    monkeypatch: pytest.MonkeyPatch,
    *,
    want: int = 2,
    horizon: float = 600.0,
    times: int | None = None,
    timeout: float | None = None,
    get_lag: float = 0.0,
    get_not_found: bool = False,
    deadline: float | None = None,
    launch_timeout: float | None = None,
) -> Outcome:
    """``fault`` on the first ``times`` create requests (None: every one; ``fault`` None: a clean network)
    against a listing ``lag`` seconds late (and a get-by-id ``get_lag`` seconds late, in the fake; or, with
    ``get_not_found``, every get-by-id answered 404 by the proxy). ``timeout``: the adapter's request
    timeout (real seconds; a ``HANG`` holds the answer half a second longer), else its documented default.
    ``deadline``: the daemon's per-call deadline around the adapter (real seconds; a ``HANG`` holds the
    answer a second longer, well inside the adapter's own timeout), else none. ``launch_timeout``: the
    tier's (seconds), else its default."""
    clock = FakeClock()
    with ACCOUNTS[adapter](clock, lag, monkeypatch, get_lag) as (account, proxy):
        method, path = account.create_path
        if fault is not None:
            proxy.add(fault, method=method, path=path, times=times)
        if get_not_found:
            proxy.add(ProxyFault.NOT_FOUND, method="GET", path=account.get_path, times=None)
        if timeout is not None:
            proxy.hang_seconds = timeout + 0.5
            account.config = dataclasses.replace(account.config, options={**account.config.options, "timeout": timeout})
        provider: Provider = build_provider(account.config, clock)
        cut: DeadlineProvider | None = None
        if deadline is not None:  # as the daemon wraps every account; a HANG holds the answer past the deadline
            proxy.hang_seconds = deadline + 1.0
            cut = DeadlineProvider(provider, deadline, clock)
            provider = as_provider(cut)
        fields = {"launch_timeout": f"{launch_timeout:g}s"} if launch_timeout is not None else {}
        web = tier(account.gpu, providers=[account.name], min=want, max=want, policy=min_floor(want), **fields)
        text = tiers_yaml(
            {"web": web},
            {
                account.name: {
                    "type": account.config.type,
                    "base_url": account.config.base_url,
                    "options": dict(account.config.options),
                }
            },
        )
        engine = make_engine("sqlite://")
        Base.metadata.create_all(engine)
        store = Store(engine)
        store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", clock.now())
        reconciler = Reconciler(store, {account.name: provider}, StaticSignals(clock), clock, policy=PolicyRunner())
        start, converged_at, calm = clock.now(), None, 0
        try:
            while clock.now() - start < horizon and calm < AFTER:
                await reconciler.tick()
                if cut is not None and cut._probe is not None:  # a silent account's probe answers between
                    await asyncio.wait([cut._probe])  # ticks, as in the daemon (its ticks are seconds apart)
                account.boot()
                rows = held(store)
                ours = account.live()
                done = len(rows) == want and all(rows.values()) and set(ours) == set(rows.values())
                if done and converged_at is None:
                    converged_at = clock.now() - start
                calm = calm + 1 if converged_at is not None else 0
                clock.advance(STEP)
        finally:
            await provider.aclose()
        rows = held(store)
        ours = account.live()
        made = account.made()
        ours_made = [k for k in made if k.startswith(PREFIX)]
        deletes = sum(1 for m, _p in proxy.forwarded if m == "DELETE")
        return Outcome(
            adapter=adapter,
            fault=fault.value if fault is not None else "none",
            lag=lag,
            want=want,
            creates=sum(1 for m, p in proxy.forwarded if m == method and p.startswith(path)),
            made=len(ours_made),
            duplicates=sum(n - 1 for n in Counter(ours_made).values()),
            leaked=len(set(ours) - {pid for pid in rows.values() if pid}),
            deleted=deletes,
            converged_at=converged_at,
            rows=len(rows),
        )
