"""Cost per 1,000 requests: dollars billed in the window over requests counted in it; unknown, never zero,
when too little of the window was read or nothing arrived."""

from __future__ import annotations

import pytest

from scalectl.controller.unit_cost import billed_in, cost_per_1k


def test_billing_is_clipped_to_the_window() -> None:
    spans = [(0.0, None, 3.6), (1800.0, 2700.0, 3.6), (-100.0, 100.0, 36.0), (-500.0, -1.0, 100.0)]
    # 3600 s + 900 s at $3.6/h, 100 s at $36/h, nothing from the one that ended before the window
    assert billed_in(spans, 0.0, 3600.0) == pytest.approx(3.6 + 0.9 + 1.0)


@pytest.mark.parametrize(("minutes_read", "expected"), [(29, None), (30, 10.0)])
def test_half_the_window_must_have_been_read(minutes_read: int, expected: float | None) -> None:
    counted = {m: 20.0 for m in range(minutes_read)}
    dollars = 20.0 * minutes_read * 10.0 / 1000.0  # $10 per 1,000
    assert cost_per_1k(dollars, counted, 0.0, 3600.0) == expected


def test_no_requests_is_unknown_not_zero_or_infinite() -> None:
    assert cost_per_1k(5.0, {m: 0.0 for m in range(60)}, 0.0, 3600.0) is None
