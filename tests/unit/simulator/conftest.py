from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from scalectl.sizing.spec import ServingSpec

# $SCALECTL_TRACES, else the shared traces folder beside the repository (as the example workloads read it)
TRACES = Path(os.environ.get("SCALECTL_TRACES") or Path(__file__).resolve().parents[3].parent / "shared" / "traces")


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    if not TRACES.is_dir():
        pytest.fail(f"the shared traces folder {TRACES} is missing; these tests read the real traces in place")
    return TRACES


@dataclass(frozen=True)
class TierLike:
    """The part of a tier's configuration the fleet reads (``scalectl.tiers.config.TierSpec`` fits too)."""

    gpu: str = "H100-SXM5-80GB"
    gpu_count: int = 1
    capacity: str = "on-demand"
    serving: ServingSpec = field(default_factory=ServingSpec)


@pytest.fixture
def tier() -> type[TierLike]:
    return TierLike
