"""Garbage collection by (key, provider id): a second machine under a live row's key bills too. It is
deleted once seen for longer than its provider's listing lag plus a grace; the row's own is never."""

from __future__ import annotations

from collections.abc import Callable

from scalectl.controller.reconciler.garbage import DUPLICATE_GRACE
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec
from tests.unit.reconciler.conftest import World


async def test_a_second_machine_under_a_live_key_is_deleted_after_the_grace_and_the_rows_own_kept(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    await w.bring_up("web", 1)
    (row,) = w.rows("web", ("ready",))
    own = row.provider_id
    assert own is not None
    offers = await w.cloud.offers(GpuRequest(gpu=row.gpu, capacity=Capacity.ON_DEMAND))
    spec = LaunchSpec(key=row.key, tier="web", offer=offers[0], capacity=Capacity.ON_DEMAND)
    del w.cloud.fleet.by_key[row.key]  # a create whose answer was lost, repeated: the cloud made a second one
    second = (await w.cloud.create(spec)).provider_id
    w.cloud.fleet.by_key[row.key] = own
    await w.run(ticks=int(DUPLICATE_GRACE / 5.0) - 2)  # inside the grace: kept (it may still be adopted)
    assert {i.provider_id for i in await w.cloud_live()} == {own, second}
    await w.run(ticks=6)
    assert {i.provider_id for i in await w.cloud_live()} == {own}  # the duplicate went, the row's own stayed
    (row,) = w.rows("web", ("ready",))
    assert row.provider_id == own
