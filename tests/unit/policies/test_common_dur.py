"""Durations in reasons read as a person writes them, at every scale."""

from __future__ import annotations

import pytest

from scalectl.policies.common import dur


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(4.25, "4.2s"), (31, "31s"), (300, "5m"), (299, "4m59s"), (3600, "1h"), (3660, "1h1m"), (95522, "26h32m2s"),
     (7205, "2h5s"), (86400, "1d"), (90000, "25h")],
)  # fmt: skip
def test_a_duration_in_a_reason(seconds: float, text: str) -> None:
    assert dur(seconds) == text
