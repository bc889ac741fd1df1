"""EC2 GPU instance types: which catalogue GPU, how many, and a seed on-demand price.

The on-demand prices are a table, not a live lookup: EC2's price list lives behind a different API
(``pricing``, served from us-east-1 only) and changes rarely. They are Linux on-demand prices for
us-east-1 and can be overridden per account with ``options.on_demand_prices``. Spot prices are live
(``describe_spot_price_history``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scalectl.sizing.gpus import UnknownGpu, normalize_gpu


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    gpu: str  # canonical catalogue name (sizing/gpus.py)
    gpu_count: int
    on_demand_per_hour: float  # $ per hour for the whole instance, us-east-1 Linux


# One row per (GPU, count): the smallest instance type that carries it. Prices: p5 from the case study
# ($55.04 for 8x H100 = $6.88 per GPU after the June 2025 reduction; p5.4xlarge priced at the same per-GPU
# rate), the rest from the public EC2 price page (spring 2026, approximate; verify before budgeting).
INSTANCE_TYPES: dict[str, InstanceType] = {
    t.name: t
    for t in (
        InstanceType("p5.4xlarge", "H100-SXM5-80GB", 1, 6.88),
        InstanceType("p5.48xlarge", "H100-SXM5-80GB", 8, 55.04),
        # p4d carries A100 40GB SXM4; the catalogue's one A100 40GB entry has the same memory and bandwidth.
        InstanceType("p4d.24xlarge", "A100-40GB-PCIe", 8, 21.96),
        InstanceType("p4de.24xlarge", "A100-80GB-SXM4", 8, 27.45),
        InstanceType("g6e.xlarge", "L40S-48GB", 1, 1.861),
        InstanceType("g6e.12xlarge", "L40S-48GB", 4, 10.493),
        InstanceType("g6e.48xlarge", "L40S-48GB", 8, 30.131),
    )
}


def instance_types_for(gpu: str, count: int) -> list[InstanceType]:
    """Instance types with exactly ``count`` of ``gpu`` (any spelling); unknown GPUs have none."""
    try:
        canonical = normalize_gpu(gpu)
    except UnknownGpu:
        return []
    return [t for t in INSTANCE_TYPES.values() if t.gpu == canonical and t.gpu_count == count]


def on_demand_price(instance_type: str, overrides: Mapping[str, float]) -> float | None:
    if instance_type in overrides:
        return float(overrides[instance_type])
    known = INSTANCE_TYPES.get(instance_type)
    return known.on_demand_per_hour if known else None
