"""The priors from the sizing model: sequence slots (in flight) and compute (tokens per second)."""

from __future__ import annotations

import pytest

from scalectl.policies.prior import capacity_prior, compute_prior
from scalectl.sizing.spec import ServingSpec


def test_compute_is_two_flops_per_parameter_per_token_at_the_gpus_effective_peak() -> None:
    h100 = compute_prior(ServingSpec(), "H100-SXM5-80GB", 1)
    a100 = compute_prior(ServingSpec(), "A100-80GB-PCIe", 1)
    assert h100 is not None and a100 is not None
    assert 30_000 < h100 < 120_000  # Llama 3.1 8B in FP8 on an H100: tens of thousands of tokens per second
    assert a100 < h100 / 2  # BF16 on an A100 (no FP8 tensor cores), about a third of the FLOPs
    assert capacity_prior(ServingSpec(), "H100-SXM5-80GB", 1) == pytest.approx(160.0)


def test_a_model_the_catalogue_cannot_size_has_no_compute_prior() -> None:
    assert compute_prior(ServingSpec(model="nobody/unknown-model-7b"), "H100-SXM5-80GB", 1) is None
