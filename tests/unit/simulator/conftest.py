from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

TRACES = Path("/work/shared/traces")


@pytest.fixture
def traces_dir() -> Path:
    if not TRACES.is_dir():
        pytest.fail(f"the shared traces folder {TRACES} is missing; these tests read the real traces in place")
    return TRACES


@dataclass(frozen=True)
class ServingLike:
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    max_model_len: int = 4096
    target_concurrency: int = 100


@dataclass(frozen=True)
class TierLike:
    """The part of a tier's configuration the fleet reads (``controller.config.TierSpec`` fits too)."""

    gpu: str = "H100-SXM5-80GB"
    gpu_count: int = 1
    capacity: str = "on-demand"
    serving: ServingLike = ServingLike()


@pytest.fixture
def tier() -> type[TierLike]:
    return TierLike
