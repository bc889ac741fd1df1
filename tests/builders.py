"""Tiers for tests: built from a few keywords instead of YAML written out again in every file.

    tiers_yaml({"web": tier(max=6), "batch": tier("A100-80GB-PCIe", capacity="spot", fallback="on-demand")})

``tier`` fills what a test rarely cares about (on-demand H100 on the simulated cloud, 0..4, scale to zero);
any other field of the tier spec passes through as written in YAML (``budget_per_hour=6.0``,
``launch_timeout="10m"``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from scalectl.controller.store.models import InstanceRecord
from scalectl.domain.instance import InstanceState
from scalectl.tiers.config import FleetConfig, TierSpec, parse_config

H100 = "H100-SXM5-80GB"
Specs = Mapping[str, Mapping[str, Any]]  # name -> fields, as in the YAML file


def tier(
    gpu: str = H100,
    *,
    capacity: str = "on-demand",
    providers: Sequence[str] = ("simulated",),
    min: int = 0,
    max: int = 4,
    policy: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": capacity, "gpu": gpu, "providers": list(providers), "min": min, "max": max}
    spec.update(fields)
    spec["policy"] = dict(policy) if policy is not None else {"kind": "scale-to-zero"}
    return spec


def min_floor(floor: int = 0, **options: Any) -> dict[str, Any]:
    return {"kind": "min-floor", "floor": floor, **options}


def tiers_yaml(tiers: Specs, providers: Specs | None = None) -> str:
    """The configuration file's text (what `scalectl apply` stores)."""
    data: dict[str, Any] = {"tiers": {name: dict(spec) for name, spec in tiers.items()}}
    if providers:
        data["providers"] = {name: dict(entry) for name, entry in providers.items()}
    return yaml.safe_dump(data, sort_keys=False)


def fleet(
    tiers: Mapping[str, Mapping[str, Any]], providers: Mapping[str, Mapping[str, Any]] | None = None
) -> FleetConfig:
    return parse_config(tiers_yaml(tiers, providers), "tiers.yaml")


def tier_spec(gpu: str = H100, *, providers: Specs | None = None, **kw: Any) -> TierSpec:
    """One validated tier (named "t"); ``providers``: the top-level providers block, when it needs one."""
    names = kw.pop("provider_names", None) or (list(providers) if providers else ["simulated"])
    return fleet({"t": tier(gpu, providers=names, **kw)}, providers).tiers["t"]


def ready_instance_row(key: str, provider: str, provider_id: str, tier: str = "web") -> InstanceRecord:
    """A stored, ready spot instance of ``tier`` (for store-level tests that need one to match)."""
    return InstanceRecord(
        key=key,
        tier=tier,
        state=InstanceState.READY.value,
        provider=provider,
        provider_id=provider_id,
        offer_id="o",
        gpu="H100-SXM5-80GB",
        gpu_count=1,
        region="r",
        capacity="spot",
        price_per_hour=0.99,
        created_at=1.0,
        updated_at=1.0,
    )
