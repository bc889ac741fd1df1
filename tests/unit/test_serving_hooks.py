"""build_hooks: the server each launch carries and its rendering by each provider type's adapter,
readiness and drain checks against an in-process vLLM stand-in on 127.0.0.1, routing through a recording
target, and the settings that configure it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from scalectl.clocks import FakeClock
from scalectl.controller.serving_hooks import ServingHooks, arg_value, build_hooks, provider_capabilities, provider_type
from scalectl.controller.settings import Settings
from scalectl.controller.store.models import InstanceRecord
from scalectl.providers.registry import adapter_class
from scalectl.serving.bootstrap.cloud_init import CloudConfig
from scalectl.serving.bootstrap.container import ContainerLaunch
from scalectl.serving.routing import Endpoint, NginxTarget, RoutingResult, TierRoute
from scalectl.tiers.config import FleetConfig, TierSpec, parse_config
from scalectl.vllm_standin.app import StandinConfig
from scalectl.vllm_standin.server import RunningStandins, run_in_thread

TIERS = """
tiers:
  chat:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [local, pod, box, lam, sim, simulated, odd]
    min: 1
    max: 4
    drain_timeout: 40s
    policy: {kind: min-floor, floor: 1}
    serving: {max_model_len: 2048, target_concurrency: 50, session_affinity: true}
  custom:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [local, pod]
    min: 0
    max: 2
    policy: {kind: min-floor, floor: 0}
    serving: {model: acme/in-house-model, max_model_len: 3000, target_concurrency: 8}
providers:
  pod: {type: runpod}
  box: {type: aws}
  lam: {type: lambda}
  sim: {type: simulated}
  odd: {type: vastai}
"""
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def fleet() -> FleetConfig:
    return parse_config(TIERS, "tiers.yaml")


class RecordingTarget:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[TierRoute, list[str]]] = []
        self.fail = fail

    async def apply(self, tier: TierRoute, endpoints: Sequence[Endpoint]) -> RoutingResult:
        if self.fail:
            from scalectl.serving.routing import RoutingError

            raise RoutingError("nginx said no")
        self.calls.append((tier, [e.address for e in endpoints]))
        return RoutingResult(tier.name, changed=True, reloaded=True, endpoints=len(endpoints))


def _hooks(fleet: FleetConfig, router: RecordingTarget | None = None, **settings: object) -> ServingHooks:
    return ServingHooks(Settings(**settings), FakeClock(), lambda: fleet, router=router)  # type: ignore[arg-type]


def _rendered(fleet: FleetConfig, hooks: ServingHooks, name: str, provider: str, tier: TierSpec | None = None) -> Any:
    """A launch of tier ``name`` as ``provider``'s adapter renders the server description the hooks give it."""
    kind = provider_type(fleet, provider)
    assert kind is not None
    cls: Any = adapter_class(kind)
    return cls.render_launch(hooks.server_for(name, tier or fleet.tiers[name]))


def _row(provider: str, address: str | None, tier: str = "chat", key: str = "sc-chat-1") -> InstanceRecord:
    return InstanceRecord(key=key, tier=tier, provider=provider, address=address, state="draining")


@pytest.fixture
def standin() -> Iterator[RunningStandins]:
    # Slow enough that a request is still running when the drain check looks.
    with run_in_thread(StandinConfig(model=MODEL, max_model_len=2048, speed=0.2)) as running:
        yield running


# ---- bootstrap per provider type ------------------------------------------------------------------
def test_local_gets_the_stand_in_arguments_from_the_tuned_plan(fleet: FleetConfig) -> None:
    args = _rendered(fleet, _hooks(fleet), "chat", "local")
    assert args == ("--model", MODEL, "--max-model-len", "2048", "--max-num-seqs", "100")


def test_container_types_get_image_and_args_only(fleet: FleetConfig) -> None:
    hooks = _hooks(fleet)
    for name in ("pod", "odd"):
        boot = _rendered(fleet, hooks, "chat", name)
        assert isinstance(boot, ContainerLaunch)  # image, args, env and ports: no user data, no script
        assert boot.image == fleet.tiers["chat"].serving.image
        assert boot.args[:2] == ("--model", MODEL)
        assert arg_value(boot.args, "--max-model-len") == "2048"
        assert arg_value(boot.args, "--shutdown-timeout") == "40"
        assert boot.env["HF_TOKEN"] == "${secret:HF_TOKEN}"  # a reference, resolved by the adapter
        assert boot.ports == (8000,)


def test_vm_types_get_cloud_init_only(fleet: FleetConfig) -> None:
    hooks = _hooks(fleet)
    for name in ("box", "lam"):
        boot = _rendered(fleet, hooks, "chat", name)
        assert isinstance(boot, CloudConfig)  # a cloud-config document: no image, no args, no script
        user_data = boot.user_data()
        assert user_data.startswith("#cloud-config")
        doc = yaml.safe_load(user_data)
        unit = next(f["content"] for f in doc["write_files"] if f["path"].endswith(".service"))
        assert f"vllm serve {MODEL}" in unit and "--max-model-len 2048" in unit


def test_simulated_types_get_nothing_to_boot(fleet: FleetConfig) -> None:
    hooks = _hooks(fleet)
    for name in ("sim", "simulated"):
        assert _rendered(fleet, hooks, "chat", name) is None


async def test_an_unknown_type_declares_nothing_so_its_servers_are_probed(fleet: FleetConfig) -> None:
    custom = fleet.model_copy(update={"providers": {**fleet.providers, "pod": fleet.providers["pod"].model_copy(
        update={"type": "newcloud"})}})  # fmt: skip
    assert provider_capabilities(custom, "pod") is None
    hooks = _hooks(custom)
    try:
        ok, reason = await hooks.readiness(custom.tiers["chat"], _row("pod", None))
        assert not ok and "address" in reason  # never taken as ready without a probe
        assert await hooks.drain_check(_row("pod", None)) is None  # nor as drained
    finally:
        await hooks.aclose()


def test_a_model_the_catalogue_lacks_launches_with_plain_arguments(
    fleet: FleetConfig, caplog: pytest.LogCaptureFixture
) -> None:
    hooks = _hooks(fleet)
    tier = fleet.tiers["custom"]
    local = _rendered(fleet, hooks, "custom", "local", tier)
    assert local == ("--model", "acme/in-house-model", "--max-model-len", "3000", "--max-num-seqs", "16")
    pod = _rendered(fleet, hooks, "custom", "pod", tier)
    assert arg_value(pod.args, "--model") == "acme/in-house-model"
    assert arg_value(pod.args, "--gpu-memory-utilization") == "0.9"
    warnings = [r.getMessage() for r in caplog.records if "untuned" in r.getMessage()]
    assert len(warnings) == 1 and "custom" in warnings[0]  # said once per tier spec, not per launch


def test_an_unknown_gpu_launches_with_plain_arguments_too(fleet: FleetConfig) -> None:
    tier = fleet.tiers["chat"].model_copy(update={"gpu": "Z9000-11GB"})
    args = _rendered(fleet, _hooks(fleet), "chat", "local", tier)
    assert args == ("--model", MODEL, "--max-model-len", "2048", "--max-num-seqs", "100")


def test_extra_args_override_what_readiness_expects(fleet: FleetConfig) -> None:
    tier = fleet.tiers["chat"]
    serving = tier.serving.model_copy(update={"extra_args": ("--max-model-len", "1024")})
    tier = tier.model_copy(update={"serving": serving})
    args = _rendered(fleet, _hooks(fleet), "chat", "local", tier)
    assert arg_value(args, "--max-model-len") == "1024"


# ---- readiness --------------------------------------------------------------------------------------
async def test_readiness_checks_model_and_length_against_the_stand_in(
    fleet: FleetConfig, standin: RunningStandins
) -> None:
    address = standin.url.removeprefix("http://")
    hooks = _hooks(fleet)
    try:
        ok, reason = await hooks.readiness(fleet.tiers["chat"], _row("local", address))
        assert ok, reason
        assert MODEL in reason
        # The custom tier expects another model: not ready, and the reason says which one it saw.
        ok, reason = await hooks.readiness(fleet.tiers["custom"], _row("local", address, tier="custom"))
        assert not ok and "acme/in-house-model" in reason and MODEL in reason
        longer = fleet.tiers["chat"].model_copy(
            update={"serving": fleet.tiers["chat"].serving.model_copy(update={"max_model_len": 4096})}
        )
        ok, reason = await hooks.readiness(longer, _row("local", address))
        assert not ok and "4096" in reason
        ok, reason = await hooks.readiness(fleet.tiers["chat"], _row("local", None))
        assert not ok and "address" in reason
        ok, _ = await hooks.readiness(fleet.tiers["chat"], _row("sim", None))
        assert ok  # simulated machines have no server to probe
    finally:
        await hooks.aclose()


# ---- drain ------------------------------------------------------------------------------------------
async def test_drain_check_counts_requests_in_flight_on_the_stand_in(
    fleet: FleetConfig, standin: RunningStandins
) -> None:
    address = standin.url.removeprefix("http://")
    hooks = _hooks(fleet)
    row = _row("local", address)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 40, "ignore_eos": True}
    try:
        assert await hooks.drain_check(row) == 0
        async with httpx.AsyncClient(timeout=30) as client:
            request = asyncio.create_task(client.post(f"{standin.url}/v1/chat/completions", json=body))
            seen = 0.0
            for _ in range(200):  # bounded: until the engine has admitted it
                seen = await hooks.drain_check(row) or 0.0
                if seen >= 1 or request.done():
                    break
                await asyncio.sleep(0.01)
            assert seen == 1
            response = await request
        assert response.status_code == 200
        assert await hooks.drain_check(row) == 0
    finally:
        await hooks.aclose()


async def test_drain_check_is_unknown_when_the_server_cannot_be_read(fleet: FleetConfig) -> None:
    hooks = _hooks(fleet)
    try:
        assert await hooks.drain_check(_row("local", "127.0.0.1:9")) is None  # nothing listens on port 9
        assert await hooks.drain_check(_row("local", None)) is None
        assert await hooks.drain_check(_row("sim", "10.0.0.1:8000")) == 0  # nothing to drain over HTTP
    finally:
        await hooks.aclose()


async def test_drain_waits_until_the_load_balancer_stopped_sending(
    fleet: FleetConfig, standin: RunningStandins
) -> None:
    address = standin.url.removeprefix("http://")
    router = RecordingTarget()
    hooks = _hooks(fleet, router, routing="nginx")
    row = _row("local", address)
    try:
        assert await hooks.drain_check(row) is None  # routes never written yet: the proxy may hold it
        await hooks.route_update("chat", fleet.tiers["chat"], [address, "127.0.0.1:7001"])
        assert await hooks.drain_check(row) is None  # idle, but still routed
        await hooks.route_update("chat", fleet.tiers["chat"], ["127.0.0.1:7001"])
        assert await hooks.drain_check(row) == 0
    finally:
        await hooks.aclose()


async def test_a_failed_route_update_keeps_the_instance_counted_as_routed(
    fleet: FleetConfig, standin: RunningStandins
) -> None:
    address = standin.url.removeprefix("http://")
    router = RecordingTarget()
    hooks = _hooks(fleet, router, routing="nginx")
    try:
        await hooks.route_update("chat", fleet.tiers["chat"], [address])
        router.fail = True
        with pytest.raises(Exception, match="nginx said no"):
            await hooks.route_update("chat", fleet.tiers["chat"], [])
        assert await hooks.drain_check(_row("local", address)) is None
    finally:
        await hooks.aclose()


# ---- routing ------------------------------------------------------------------------------------------
async def test_route_update_passes_affinity_listen_and_skips_bad_addresses(fleet: FleetConfig) -> None:
    router = RecordingTarget()
    hooks = _hooks(fleet, router, routing="nginx", routing_listen={"chat": "127.0.0.1:8080"})
    try:
        await hooks.route_update("chat", fleet.tiers["chat"], ["127.0.0.1:7001", "bad address; evil"])
        await hooks.route_update("custom", fleet.tiers["custom"], [])
    finally:
        await hooks.aclose()
    (chat, chat_eps), (custom, custom_eps) = router.calls
    assert (chat.name, chat.session_affinity, chat.listen, chat_eps) == (
        "chat",
        True,
        "127.0.0.1:8080",
        ["127.0.0.1:7001"],
    )
    assert (custom.name, custom.session_affinity, custom.listen, custom_eps) == ("custom", False, None, [])


async def test_route_remove_deletes_a_removed_tiers_upstream(fleet: FleetConfig, tmp_path: Path) -> None:
    settings = Settings(
        routing="nginx",
        routing_conf_dir=tmp_path,
        routing_main_conf=tmp_path / "nginx.conf",
        routing_test_command=["true"],
        routing_reload_command=["true"],
    )
    hooks = build_hooks(settings, FakeClock(), lambda: fleet)
    try:
        await hooks.route_update("chat", fleet.tiers["chat"], ["127.0.0.1:7001"])
        target = hooks._router
        assert isinstance(target, NginxTarget) and target.path_for("chat").exists()
        await hooks.route_remove("chat")
        assert not target.path_for("chat").exists()
    finally:
        await hooks.aclose()


# ---- what the daemon gets -------------------------------------------------------------------------------
async def test_reconciler_kwargs_follow_the_settings(fleet: FleetConfig, tmp_path: Path) -> None:
    plain = build_hooks(Settings(), FakeClock(), fleet)
    kwargs = plain.reconciler_kwargs()
    assert set(kwargs) == {"readiness", "drain_check", "server_for"}
    # Which machines are ready once running is the adapters' declaration, asked by the reconciler itself.
    names = ("local", "pod", "box", "lam", "sim", "simulated", "odd")
    capabilities = {n: provider_capabilities(fleet, n) for n in names}
    ready_on_running = {n for n, caps in capabilities.items() if caps is not None and caps.running_means_ready}
    assert ready_on_running == {"sim", "simulated"}
    await plain.aclose()

    routed = build_hooks(
        Settings(
            routing="nginx",
            routing_conf_dir=tmp_path,
            routing_main_conf=tmp_path / "nginx.conf",
            routing_reload_command=["systemctl", "reload", "nginx"],
        ),
        FakeClock(),
        lambda: fleet,
    )
    kwargs = routed.reconciler_kwargs()
    assert "route_update" in kwargs and "route_remove" in kwargs
    target = routed._router
    assert isinstance(target, NginxTarget)
    assert target.config_dir == tmp_path
    assert target.reload_command == ["systemctl", "reload", "nginx"]
    assert target.test_command == ["nginx", "-c", str(tmp_path / "nginx.conf"), "-t", "-q"]
    await routed.aclose()


def test_routing_and_webhook_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALECTL_ROUTING", "nginx")
    monkeypatch.setenv("SCALECTL_ROUTING_CONF_DIR", "/srv/nginx/scalectl")
    monkeypatch.setenv("SCALECTL_ROUTING_RELOAD_COMMAND", json.dumps(["systemctl", "reload", "nginx"]))
    monkeypatch.setenv("SCALECTL_ROUTING_LISTEN", json.dumps({"chat": "0.0.0.0:8080"}))
    monkeypatch.setenv("SCALECTL_EVENTBRIDGE_TOKEN_FILE", "/etc/scalectl/eventbridge-token")
    s = Settings()
    assert s.routing == "nginx"
    assert s.routing_conf_dir == Path("/srv/nginx/scalectl")
    assert s.routing_reload_command == ["systemctl", "reload", "nginx"]
    assert s.routing_listen == {"chat": "0.0.0.0:8080"}
    assert s.eventbridge_token_file == Path("/etc/scalectl/eventbridge-token")
    assert s.eventbridge_token_env == "SCALECTL_EVENTBRIDGE_TOKEN"
    monkeypatch.setenv("SCALECTL_ROUTING", "haproxy")
    with pytest.raises(ValueError, match="routing"):
        Settings()
