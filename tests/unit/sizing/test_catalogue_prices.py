"""Every catalogue entry's seed prices: positive, and spot below on-demand unless a named source says not."""

from __future__ import annotations

import pytest

from scalectl.sizing.gpus import GPUS, SPOT_NOT_CHEAPER_SOURCES


@pytest.mark.parametrize("name", sorted(GPUS))
def test_seed_prices_are_positive_and_spot_is_cheaper(name: str) -> None:
    gpu = GPUS[name]
    assert gpu.on_demand_per_hour > 0
    if gpu.spot_per_hour is None:
        return  # not sold as spot
    assert gpu.spot_per_hour > 0
    if name in SPOT_NOT_CHEAPER_SOURCES:
        assert SPOT_NOT_CHEAPER_SOURCES[name].strip(), f"{name}: name the source that prices spot this high"
    else:
        assert gpu.spot_per_hour < gpu.on_demand_per_hour, (
            f"{name}: spot ${gpu.spot_per_hour}/h is not below on-demand ${gpu.on_demand_per_hour}/h; fix the "
            "seed or name the source in SPOT_NOT_CHEAPER_SOURCES"
        )


def test_every_source_names_a_catalogue_gpu() -> None:
    assert set(SPOT_NOT_CHEAPER_SOURCES) <= set(GPUS)
