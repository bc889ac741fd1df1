"""Calls out of the reconciler: provider errors are answers; anything else is a bug, logged in full."""

from __future__ import annotations

import logging

import pytest

from scalectl.controller.reconciler.calls import Calls
from scalectl.providers.errors import Transient


async def test_a_provider_error_is_returned_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> int:
        raise Transient("502 Bad Gateway", provider="p")

    result = await Calls().call(fails())
    assert isinstance(result, Transient)
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_bug_in_an_adapter_is_logged_with_its_traceback_and_fails_only_that_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def buggy() -> int:
        return {}["missing"]  # type: ignore[no-any-return]

    async def fine() -> int:
        return 7

    with caplog.at_level(logging.ERROR, logger="scalectl.reconciler"):
        results = await Calls().gather([buggy(), fine()])
    assert isinstance(results[0], KeyError) and results[1] == 7
    (record,) = [r for r in caplog.records if r.exc_info]
    assert record.exc_info is not None and record.exc_info[0] is KeyError


async def test_a_store_gone_under_a_hook_is_one_line_not_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """A readiness hook reads the configuration; the database cut its connection (a restart, a failover)."""
    from sqlalchemy.exc import OperationalError

    async def reads_the_store() -> int:
        raise OperationalError("SELECT max(version)", {}, Exception("terminating connection due to administrator"))

    with caplog.at_level(logging.WARNING, logger="scalectl.reconciler"):
        result = await Calls().call(reads_the_store())
    assert isinstance(result, OperationalError)
    assert not [r for r in caplog.records if r.exc_info]
    assert any("the store is unreachable" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
