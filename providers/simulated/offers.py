"""The simulated cloud's offers: the catalogue's seed prices per region and capacity kind."""

from __future__ import annotations

from collections.abc import Callable

from scalectl.providers.base import Capacity, GpuRequest, Offer
from scalectl.providers.simulated.machines import pool_of
from scalectl.providers.simulated.options import SimOptions
from scalectl.sizing.gpus import GPUS, UnknownGpu, normalize_gpu


def seed_offers(want: GpuRequest, options: SimOptions, *, provider: str, free: Callable[[str], int]) -> list[Offer]:
    """Seed-price offers per region and capacity kind, with what each pool has free."""
    try:
        gpu = normalize_gpu(want.gpu)
    except UnknownGpu:
        return []
    info = GPUS[gpu]
    spot = info.spot_per_hour * want.count if info.spot_per_hour is not None else None
    offers = []
    for region in (r for r in options.regions if not want.regions or r in want.regions):
        for cap in (Capacity.ON_DEMAND, Capacity.SPOT):
            if want.capacity not in (None, cap) or (cap is Capacity.SPOT and spot is None):
                continue
            pool = pool_of(gpu, region, cap)
            available = free(pool)
            on_demand = round(info.on_demand_per_hour * want.count, 4)
            offers.append(
                Offer(
                    provider=provider,
                    offer_id=offer_id_of(gpu, want.count, region, cap),
                    gpu=gpu,
                    gpu_count=want.count,
                    region=region,
                    on_demand_per_hour=on_demand if cap is Capacity.ON_DEMAND else None,
                    spot_per_hour=spot if cap is Capacity.SPOT else None,
                    available=available > 0,
                    available_count=available,
                )
            )
    return offers


def offer_id_of(gpu: str, count: int, region: str, capacity: Capacity) -> str:
    return f"{gpu}x{count}/{region}/{capacity.value}"
