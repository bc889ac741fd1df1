from __future__ import annotations

from pathlib import Path

import pytest

TRACES = Path("/work/shared/traces")


@pytest.fixture
def traces_dir() -> Path:
    if not TRACES.is_dir():
        pytest.fail(f"the shared traces folder {TRACES} is missing; these tests read the real traces in place")
    return TRACES
