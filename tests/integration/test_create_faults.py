"""Never a billed machine doubled: the reconciler drives each real adapter over loopback HTTP through a
fault proxy to a local provider API whose listing lags behind its creates. After convergence: one create
per instance wanted, no duplicate, nothing leaked, and the machines made are adopted, not deleted."""

from __future__ import annotations

import pytest

from tests.fakes.create_faults import run_scenario
from tests.fakes.fault_proxy import ProxyFault

ADAPTERS = ["spheron", "runpod", "vastai"]
FAULTS = [
    (ProxyFault.RESET_AFTER_ACTING, 5.0),  # the provider acts, the connection resets before the answer
    (ProxyFault.RESET_AFTER_ACTING, 15.0),
    (ProxyFault.UNREADABLE_2XX, 5.0),  # every create answered 2xx with a body nobody can read
]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize(("fault", "lag"), FAULTS, ids=[f"{f.value}-lag{lag:g}s" for f, lag in FAULTS])
async def test_a_create_with_a_lost_answer_is_adopted_never_repeated(
    adapter: str, fault: ProxyFault, lag: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = await run_scenario(adapter, fault, lag, monkeypatch)
    assert out.converged_at is not None, out
    assert (out.creates, out.made, out.duplicates, out.leaked) == (out.want, out.want, 0, 0), out
    assert out.deleted == 0 and out.rows == out.want, out  # the machines made are the ones the rows hold
    assert out.converged_at <= lag + 5.0, out  # adopted at the first listing that can show them


async def test_a_lag_longer_than_declared_costs_one_duplicate_per_row_which_is_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spheron declares 30 s; a cloud 45 s late gets a second create per row after 30 s. The bound: at most
    one repeat per row per listing lag, and every repeat is deleted once seen (the row keeps the first)."""
    out = await run_scenario("spheron", ProxyFault.RESET_AFTER_ACTING, 45.0, monkeypatch)
    assert out.converged_at is not None, out
    assert out.creates == out.made == 2 * out.want, out
    assert out.duplicates == out.deleted == out.want and out.leaked == 0 and out.rows == out.want, out


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("where", ["fake", "proxy"])
async def test_a_fresh_machine_a_lagging_get_cannot_find_is_kept_not_replaced(
    adapter: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean network, but the cloud's listing shows a new machine 10 s late (inside the declared 30 s) and
    its get-by-id does not find it either: lagging as the listing does (the fake), or every get-by-id
    answered 404 (the proxy). The tick after the create finds it neither listed nor by id: that is a
    fresh machine, not a lost one. Ending it as lost launched a second machine per row and deleted the
    first once it was listed (6 creates and 6 deletes for 2 instances, on each adapter)."""
    if where == "fake":
        out = await run_scenario(adapter, None, 10.0, monkeypatch, get_lag=10.0)
    else:
        out = await run_scenario(adapter, None, 10.0, monkeypatch, get_not_found=True)
    assert out.converged_at is not None, out
    assert (out.creates, out.made, out.duplicates, out.leaked, out.deleted) == (out.want, out.want, 0, 0, 0), out
    assert out.rows == out.want, out


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("lag", [15.0, 25.0], ids=["lag15s", "lag25s"])
async def test_a_create_cut_by_its_call_deadline_is_adopted_never_repeated(
    adapter: str, lag: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's per-call deadline around the adapter (1 s here, the adapter's own timeout at its 30 s
    default): the provider acts on every create and answers only after the deadline has cut the call.
    Such a create may have acted, as one whose answer was lost: it must be adopted when listed, not sent
    again 5 s later under the same key before the listing can show the first machine (which billed a
    second machine per row until garbage collection deleted it)."""
    out = await run_scenario(adapter, ProxyFault.HANG, lag, monkeypatch, deadline=1.0)
    assert out.converged_at is not None, out
    assert (out.creates, out.made, out.duplicates, out.leaked) == (out.want, out.want, 0, 0), out
    assert out.deleted == 0 and out.rows == out.want, out


@pytest.mark.parametrize("fault", [ProxyFault.HANG, ProxyFault.RESET_AFTER_ACTING], ids=["deadline", "reset"])
async def test_an_unconfirmed_create_is_not_abandoned_and_replaced_within_the_listing_lag(
    fault: ProxyFault, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tier whose launch timeout (10 s) is shorter than its provider's declared listing lag (30 s), against
    a cloud that lists a new machine 25 s late. The row of a create whose outcome is unknown was ended as
    lost at 10 s, a new key created beside the machine the lost create made, and that one deleted once
    listed: a second machine billed per row. It is held until the create has settled, then adopted."""
    deadline = 1.0 if fault is ProxyFault.HANG else None
    out = await run_scenario("spheron", fault, 25.0, monkeypatch, deadline=deadline, launch_timeout=10.0)
    assert out.converged_at is not None, out
    assert (out.creates, out.made, out.duplicates, out.leaked) == (out.want, out.want, 0, 0), out
    assert out.deleted == 0 and out.rows == out.want, out
