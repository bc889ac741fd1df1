"""The request budget on the injected clock: a sliding window, and the provider's RateLimit headers."""

from __future__ import annotations

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.pacing import RequestBudget


def test_a_sliding_window_of_requests() -> None:
    clock = FakeClock()
    budget = RequestBudget(clock, 3, 60.0)
    for _ in range(3):
        assert budget.remaining() == 0.0
        budget.mark()
        clock.advance(10)
    assert budget.free() == 0 and budget.remaining() == pytest.approx(30.0)  # the first leaves at t=60
    clock.advance(30)
    assert budget.free() == 1 and budget.remaining() == 0.0


@pytest.mark.parametrize(
    "header",
    [
        '"minute";r=0;t=42',
        "limit=60, remaining=0, reset=42",
        '"minute";r=0;t=42, "day";r=900;t=80000',
        '"day";r=900;t=80000, "minute";r=0;t=42',
    ],
)
def test_a_ratelimit_header_saying_none_remain_holds_requests_until_its_reset(header: str) -> None:
    clock = FakeClock()
    budget = RequestBudget(clock, None, 60.0)
    budget.observe({"ratelimit": header})
    assert budget.remaining() == pytest.approx(42.0) and budget.free() is None
    clock.advance(42)
    assert budget.remaining() == 0.0


def test_remaining_quota_does_not_hold_requests() -> None:
    budget = RequestBudget(FakeClock(), None, 60.0)
    budget.observe({"ratelimit": '"minute";r=5;t=42'})
    budget.observe({})
    assert budget.remaining() == 0.0


def test_only_matching_requests_count_against_a_narrow_budget() -> None:
    budget = RequestBudget(FakeClock(), 10, 900.0, applies_to=("POST", "/api/deployments"))
    assert budget.applies("POST", "/api/deployments") and not budget.applies("GET", "/api/deployments")
    with pytest.raises(ValueError, match="limit >= 1"):
        RequestBudget(FakeClock(), 0, 60.0)
