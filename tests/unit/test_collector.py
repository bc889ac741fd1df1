"""The daemon's garbage collector threshold: raised for the young generation only, never lowered."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from scalectl.controller.collector import YOUNG_THRESHOLD, set_daemon_threshold


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_the_young_threshold_is_raised_and_the_older_ones_kept() -> None:
    gc.set_threshold(700, 7, 9)
    set_daemon_threshold()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 7, 9)


def test_a_higher_threshold_set_by_the_operator_stays() -> None:
    gc.set_threshold(YOUNG_THRESHOLD * 2, 10, 10)
    set_daemon_threshold()
    assert gc.get_threshold() == (YOUNG_THRESHOLD * 2, 10, 10)
