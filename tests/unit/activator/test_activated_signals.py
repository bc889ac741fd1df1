"""Held requests are a tier's load while it has no instance serving; with instances, vLLM's figures rule."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scalectl.clocks import FakeClock
from scalectl.controller.activation import ActivatedSignals, activated, hold_limits, sync_gates
from scalectl.controller.settings import Settings
from scalectl.policies.types import Signals
from scalectl.serving.activator import Activator, HoldLimits
from scalectl.sources.reading import TierReading
from scalectl.sources.spec import SignalsSpec
from scalectl.tiers.config import parse_config
from scalectl.tiers.errors import ConfigError
from tests.builders import fleet, min_floor, tier, tiers_yaml

CHAT = {"activator": {"max_held": 7, "max_wait": "90s"}}
TIERS = tiers_yaml({"chat": tier(policy=min_floor(0), **CHAT), "batch": tier(policy=min_floor(0))})


class Unknown:
    """A source with nothing to read (no endpoint answers): every figure unknown."""

    def __init__(self, signals: Signals | None = None):
        self.signals = signals or Signals()

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        return TierReading(self.signals, 0.0)

    async def aclose(self) -> None:
        return None

    def error_counts(self, tier: str) -> dict[str, int]:
        return {"vllm": 2}


def settings(**overrides: object) -> Settings:
    base: dict[str, object] = {"routing": "nginx", "routing_listen": {"chat": "8080"}}
    return Settings(**{**base, **overrides})  # type: ignore[arg-type]


def test_only_a_routed_tier_with_a_listen_address_is_activated() -> None:
    config = parse_config(TIERS, "t.yaml")
    chat, batch = config.tiers["chat"], config.tiers["batch"]
    assert activated(settings(), "chat", chat)
    assert not activated(settings(), "batch", batch)  # no generated server block to send it to us
    assert not activated(settings(routing="none"), "chat", chat)
    off = fleet({"chat": tier(policy=min_floor(0), activator={"enabled": False})})
    assert not activated(settings(), "chat", off.tiers["chat"])


def test_gates_follow_the_config() -> None:
    activator = Activator()
    config = parse_config(TIERS, "t.yaml")
    sync_gates(activator, settings(), config)
    assert activator.tiers() == ["chat"]
    assert activator.held("chat") == 0 and activator.held("batch") is None
    sync_gates(activator, settings(routing_listen={}), config)
    assert activator.tiers() == []


async def test_a_tier_at_zero_reads_held_requests_as_load_and_nothing_held_as_known_zero() -> None:
    clock = FakeClock(1000.0)
    activator = Activator()
    activator.configure("chat", HoldLimits(max_held=5, max_wait_s=60))
    source = ActivatedSignals(Unknown(), activator, clock)
    spec = SignalsSpec()

    first = await source.read("chat", spec, [])
    signals = first.signals
    # nobody waits: an idle tier (known zeros), not an unknown one
    assert signals.requests_waiting == 0 and signals.requests_running == 0 and not signals.arrivals
    assert first.sources["requests_waiting"] == "activator"

    gate = activator._gates["chat"]
    for _ in range(3):
        assert gate.admit()
    clock.advance(10.0)
    second = await source.read("chat", spec, [])
    assert second.signals.requests_waiting == 3 and second.signals.requests_running == 0
    assert second.signals.request_rate == 0.3 and second.signals.arrivals == 3
    assert source.error_counts("chat") == {"vllm": 2}  # the wrapped reader's extras still answer


async def test_with_instances_serving_the_reading_is_vllms_own() -> None:
    activator = Activator()
    activator.configure("chat", HoldLimits())
    activator._gates["chat"].admit()
    source = ActivatedSignals(Unknown(Signals(requests_running=4.0, requests_waiting=1.0)), activator, FakeClock(0))
    reading = await source.read("chat", SignalsSpec(), ["10.0.0.1:8000"])
    assert reading.signals.requests_waiting == 1.0 and "requests_waiting" not in reading.sources


async def test_a_tier_with_a_queue_adds_it_and_an_unread_queue_keeps_the_load_unknown() -> None:
    activator = Activator()
    activator.configure("chat", HoldLimits())
    activator._gates["chat"].admit()
    spec = SignalsSpec(queue={"queues": ["q"]})
    read = ActivatedSignals(Unknown(Signals(queue_depth=4.0, in_flight=0.0)), activator, FakeClock(0))
    signals = (await read.read("chat", spec, [])).signals
    assert signals.requests_waiting == 5 and signals.requests_running == 0  # four queued, one held
    unread = ActivatedSignals(Unknown(Signals(queue_depth=None)), activator, FakeClock(0))
    unknown = (await unread.read("chat", spec, [])).signals
    assert unknown.requests_waiting is None and unknown.arrivals is None


async def test_a_tier_not_activated_stays_unknown() -> None:
    source = ActivatedSignals(Unknown(), Activator(), FakeClock(0))
    reading = await source.read("batch", SignalsSpec(), [])
    assert reading.signals.requests_waiting is None and reading.signals.arrivals is None


def test_the_tier_file_checks_activator_fields() -> None:
    with pytest.raises(ConfigError) as err:
        fleet({"chat": tier(policy=min_floor(0), activator={"max_held": 0})})
    assert 'tier "chat": activator.max_held' in str(err.value)
    with pytest.raises(ConfigError) as err:
        fleet({"chat": tier(policy=min_floor(0), activator={"max_wiat": "90s"})})
    assert "activator.max_wiat" in str(err.value) and "unknown field" in str(err.value)


def test_hold_limits_come_from_the_tier() -> None:
    tier = parse_config(TIERS, "t.yaml").tiers["chat"]
    assert hold_limits(tier) == HoldLimits(max_held=7, max_wait_s=90.0, max_body_bytes=4 * 1024 * 1024)
