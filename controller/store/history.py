"""What the store knows about recent failures: the facts the reconciler's back-offs are derived from."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from scalectl.controller.store.models import EventRecord, InstanceRecord
from scalectl.domain.failures import (
    CRASH_BACKOFF,
    CREATE_BACKOFF,
    LAUNCHED,
    NO_CAPACITY,
    PROVIDER_REFUSED,
    SPOT_WAIT,
    FailureHistory,
)


def failure_history(session: Session, since: float) -> FailureHistory:
    """Interruptions and refused creates since ``since``, oldest first; and per tier the create back-offs
    recorded after its last launch (a success ends a run of failures, however long ago it began)."""
    inst, ev = InstanceRecord, EventRecord
    interruptions = session.execute(
        select(inst.tier, inst.interrupted_at)
        .where(inst.interrupted_at.is_not(None), inst.interrupted_at >= since)
        .order_by(inst.interrupted_at)
    ).all()
    refusals = session.execute(
        select(ev.kind, inst.provider, inst.offer_id, inst.capacity, ev.t, inst.tier)
        .join(inst, inst.key == ev.instance_key)
        .where(ev.kind.in_((NO_CAPACITY, PROVIDER_REFUSED, CRASH_BACKOFF)), ev.t >= since)
        .order_by(ev.t, ev.id)
    ).all()
    launches = session.execute(select(ev.tier, func.max(ev.id)).where(ev.kind == LAUNCHED).group_by(ev.tier)).all()
    last_launch = {tier: last for tier, last in launches}
    backoffs = session.execute(
        select(ev.tier, ev.id, ev.t).where(ev.kind == CREATE_BACKOFF, ev.tier.is_not(None)).order_by(ev.id)
    ).all()
    return FailureHistory(
        spot_waits=_open_spot_waits(session),
        interruptions=[(tier, t) for tier, t in interruptions if t is not None],
        no_capacity=[(p, o, c, t) for kind, p, o, c, t, _tier in refusals if kind == NO_CAPACITY],
        refused=[(p, t) for kind, p, _o, _c, t, _tier in refusals if kind == PROVIDER_REFUSED],
        create_backoffs=[(tier, t) for tier, id_, t in backoffs if tier and id_ > (last_launch.get(tier) or 0)],
        crashes=[(tier, p, o, t) for kind, p, o, _c, t, tier in refusals if kind == CRASH_BACKOFF],
    )


def _open_spot_waits(session: Session) -> list[tuple[str, float]]:
    """Per tier, when its current wait for spot began: the first ``spot-wait`` event after its last spot
    launch (an on-demand fallback launched meanwhile does not end the wait; spot placed does). Read without
    the history window: a long ``fallback_after`` must not start over after a restart."""
    ev, inst = EventRecord, InstanceRecord
    last_spot = dict(
        session.execute(
            select(ev.tier, func.max(ev.t))
            .join(inst, inst.key == ev.instance_key)
            .where(ev.kind == LAUNCHED, inst.capacity == "spot")
            .group_by(ev.tier)
        ).all()
    )
    first_wait = session.execute(
        select(ev.tier, func.min(ev.t)).where(ev.kind == SPOT_WAIT, ev.tier.is_not(None)).group_by(ev.tier)
    ).all()
    waits: list[tuple[str, float]] = []
    for tier, first in first_wait:
        if tier is None:
            continue
        after = last_spot.get(tier)
        if after is None or first > after:
            waits.append((tier, first))
            continue
        since = session.scalar(select(func.min(ev.t)).where(ev.kind == SPOT_WAIT, ev.tier == tier, ev.t > after))
        if since is not None:
            waits.append((tier, since))
    return waits
