"""Routing weights by capacity: an instance worth twice another gets twice its weight (least_conn divides
active connections by weight); a tier without variants renders as before."""

from __future__ import annotations

import pytest

from scalectl.controller.reconciler.retire import ROUTE_WEIGHT_SCALE, Routes, route_weights
from scalectl.domain.instance import Instance, InstanceState
from scalectl.serving.routing.base import Endpoint, TierRoute
from scalectl.serving.routing.nginx_conf import render_tier
from scalectl.tiers.config import TierSpec
from tests.builders import tier_spec

H100, L40S = "H100-SXM5-80GB", "L40S-48GB"


def _ready(key: str, gpu: str, count: int, address: str) -> Instance:
    inst = Instance(key, "t", InstanceState.READY, "simulated", "o", gpu, "r", "on-demand", 1.0,
                    created_at=0.0, updated_at=0.0, gpu_count=count)  # fmt: skip
    inst.address = address
    return inst


def _tier() -> TierSpec:
    return tier_spec(H100, variants=[{"gpu": L40S, "gpu_count": 2}, {"gpu": "B200"}])


def test_weights_follow_capacity() -> None:
    tier_ = _tier()
    ready = [_ready("h", H100, 1, "10.0.0.1:8000"), _ready("l", L40S, 2, "10.0.0.2:8000"),
             _ready("b", "B200-192GB", 1, "10.0.0.3:8000")]  # fmt: skip
    weights = route_weights(tier_, ready)
    assert weights is not None
    assert weights["10.0.0.1:8000"] == ROUTE_WEIGHT_SCALE
    assert weights["10.0.0.2:8000"] == round(ROUTE_WEIGHT_SCALE * tier_.capacity_units(L40S, 2))
    assert weights["10.0.0.3:8000"] > 2 * weights["10.0.0.1:8000"] > 4 * weights["10.0.0.2:8000"]
    assert route_weights(tier_spec(H100), ready) is None  # no variants: equal, nothing to say


def test_nginx_renders_weights_and_leaves_equal_servers_alone() -> None:
    route = TierRoute("chat")
    text = render_tier(route, [Endpoint("10.0.0.1:8000", weight=10), Endpoint("10.0.0.2:8000", weight=3)])
    assert "least_conn;" in text
    assert "server 10.0.0.1:8000 weight=10 max_fails=3 fail_timeout=10s;" in text
    assert "server 10.0.0.2:8000 weight=3 max_fails=3" in text
    plain = render_tier(route, [Endpoint("10.0.0.1:8000")])
    assert "server 10.0.0.1:8000 max_fails=3 fail_timeout=10s;" in plain and "weight" not in plain
    with pytest.raises(ValueError, match="weight must be 1-1000"):
        Endpoint("10.0.0.1:8000", weight=0)


async def test_routes_pass_weights_only_for_tiers_with_variants() -> None:
    calls: list[tuple[object, ...]] = []

    async def update(name: str, tier: TierSpec, addresses: list[str], *weights: object) -> None:
        calls.append((name, addresses, *weights))

    routes = Routes(update)
    await routes._route("plain", tier_spec(H100), ["10.0.0.1:8000"], None)
    await routes._route("mixed", _tier(), ["10.0.0.1:8000"], {"10.0.0.1:8000": 10})
    await routes._route("mixed", _tier(), ["10.0.0.1:8000"], {"10.0.0.1:8000": 3})  # a weight changed: update
    assert calls == [
        ("plain", ["10.0.0.1:8000"]),
        ("mixed", ["10.0.0.1:8000"], {"10.0.0.1:8000": 10}),
        ("mixed", ["10.0.0.1:8000"], {"10.0.0.1:8000": 3}),
    ]
