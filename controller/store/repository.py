"""The store's operations, in the words the controller uses. One short transaction per call."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, Select, delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from controller.store.db import make_sessionmaker
from controller.store.models import (
    ConfigVersion,
    DecisionRecord,
    EventRecord,
    InstanceRecord,
    PolicyStateRecord,
    TierRecord,
)
from policies.types import PolicyState

if TYPE_CHECKING:  # the tiers-file models load lazily: read-only commands (`scalectl status`) never need them
    from controller.config import FleetConfig, TierSpec

R = TypeVar("R", DecisionRecord, EventRecord)
LIVE_STATES = ("pending", "provisioning", "bootstrapping", "ready", "draining")
COUNTED_STATES = ("pending", "provisioning", "bootstrapping", "ready")  # toward the tier's current count
ENDED_STATES = ("terminated", "failed")


@functools.cache
def _live_instances_query() -> Select[Any]:
    # Built once: the daemon asks every tick, and building the IN clause costs more than running it.
    return select(InstanceRecord).where(InstanceRecord.state.in_(LIVE_STATES))


@functools.cache
def _latest_version_query() -> Select[Any]:
    return select(func.max(ConfigVersion.version))


@dataclass(frozen=True)
class TierChange:
    tier: str
    change: str  # "added" | "changed" | "removed" | "unchanged"
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def tier_spec_json(spec: TierSpec) -> dict[str, Any]:
    """The canonical stored form of a tier (also what `diff` compares)."""
    data: dict[str, Any] = json.loads(spec.model_dump_json(by_alias=True))
    return data


def diff_config(current: dict[str, dict[str, Any]], fleet: FleetConfig) -> list[TierChange]:
    """Compare stored tier specs with a new configuration, tier by tier."""
    changes = []
    new = {name: tier_spec_json(spec) for name, spec in fleet.tiers.items()}
    for name in sorted(set(current) | set(new)):
        before, after = current.get(name), new.get(name)
        if before is None:
            kind = "added"
        elif after is None:
            kind = "removed"
        elif before != after:
            kind = "changed"
        else:
            kind = "unchanged"
        changes.append(TierChange(name, kind, before, after))
    return changes


class Store:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.sessions: sessionmaker[Session] = make_sessionmaker(engine)
        self._active_cache: tuple[int | None, dict[str, TierSpec]] | None = None

    # ---- configuration ---------------------------------------------------------------------------
    def tier_specs(self) -> dict[str, dict[str, Any]]:
        with self.sessions() as s:
            rows = s.scalars(select(TierRecord).where(TierRecord.active.is_(True))).all()
            return {r.name: r.spec for r in rows}

    def active_tiers(self) -> dict[str, TierSpec]:
        """The active tiers, validated. Every change to them comes with a new config version, so the
        validated specs are kept until the latest version moves (one scalar query per call)."""
        version = self.config_version()
        cached = self._active_cache
        if cached is not None and cached[0] == version:
            return dict(cached[1])
        from controller.config import TierSpec

        tiers = {name: TierSpec.model_validate(spec) for name, spec in self.tier_specs().items()}
        self._active_cache = (version, tiers)
        return dict(tiers)

    def fleet_config(self) -> FleetConfig | None:
        """The last applied configuration (tiers and providers), or None before the first apply."""
        with self.sessions() as s:
            latest = s.scalars(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(1)).first()
            if latest is None:
                return None
            from controller.config import parse_config

            return parse_config(latest.text, f"stored config v{latest.version}")

    def config_version(self) -> int | None:
        with self.engine.connect() as conn:  # a plain read, no ORM session: the reconciler asks every tick
            version: int | None = conn.scalar(_latest_version_query())
            return version

    def apply_config(
        self, fleet: FleetConfig, text: str, source: str, now: float
    ) -> tuple[int | None, list[TierChange]]:
        """Store a new version when anything changed; returns (version or None if unchanged, changes)."""
        from controller.config import config_digest

        with self.sessions.begin() as s:
            stored = {r.name: r for r in s.scalars(select(TierRecord)).all()}
            current = {n: r.spec for n, r in stored.items() if r.active}
            changes = diff_config(current, fleet)
            latest = s.scalars(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(1)).first()
            same_text = latest is not None and latest.digest == config_digest(text)
            if same_text or (
                latest is not None and all(c.change == "unchanged" for c in changes) and latest.text == text
            ):
                return None, changes
            if all(c.change == "unchanged" for c in changes) and latest is not None:
                # Tier specs are equal but the file changed (comments, providers block): still a version.
                pass
            version = ConfigVersion(applied_at=now, source=source[:500], digest=config_digest(text), text=text)
            s.add(version)
            s.flush()
            for change in changes:
                row = stored.get(change.tier)
                if change.change == "removed" and row is not None:
                    row.active, row.updated_at = False, now
                elif change.change in ("added", "changed"):
                    assert change.after is not None
                    if row is None:
                        s.add(
                            TierRecord(
                                name=change.tier,
                                spec=change.after,
                                config_version=version.version,
                                updated_at=now,
                                active=True,
                            )
                        )
                    else:
                        row.spec, row.active = change.after, True
                        row.config_version, row.updated_at = version.version, now
            for change in changes:
                if change.change != "unchanged":
                    s.add(
                        EventRecord(
                            t=now,
                            tier=change.tier,
                            kind=f"tier-{change.change}",
                            message=f"config v{version.version} from {source}",
                        )
                    )
            return version.version, changes

    # ---- instances -------------------------------------------------------------------------------
    def live_instances(self, session: Session) -> list[InstanceRecord]:
        return list(session.scalars(_live_instances_query()).all())

    def instances(
        self, tier: str | None = None, *, include_ended: bool = False, limit: int = 1000
    ) -> list[InstanceRecord]:
        with self.sessions() as s:
            q = select(InstanceRecord)
            if tier is not None:
                q = q.where(InstanceRecord.tier == tier)
            if not include_ended:
                q = q.where(InstanceRecord.state.in_(LIVE_STATES))
            return list(s.scalars(q.order_by(InstanceRecord.created_at.desc()).limit(limit)).all())

    def known_keys(self, session: Session, keys: Iterable[str]) -> set[str]:
        wanted = list(keys)
        if not wanted:
            return set()
        found: set[str] = set()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            found.update(session.scalars(select(InstanceRecord.key).where(InstanceRecord.key.in_(chunk))).all())
        return found

    def mark_notice(self, provider: str, provider_id: str | None, key: str | None, now: float) -> str | None:
        """Record an interruption notice from a webhook; returns the instance key it matched, if any."""
        with self.sessions.begin() as s:
            q = select(InstanceRecord).where(InstanceRecord.state.in_(LIVE_STATES))
            if key:
                q = q.where(InstanceRecord.key == key)
            elif provider_id:
                q = q.where(InstanceRecord.provider == provider, InstanceRecord.provider_id == provider_id)
            else:
                return None
            row = s.scalars(q).first()
            if row is None:
                return None
            if row.notice_at is None:
                row.notice_at = now
                s.add(
                    EventRecord(
                        t=now,
                        tier=row.tier,
                        instance_key=row.key,
                        kind="interruption-notice",
                        message=f"{provider} warned that {row.provider_id} will be reclaimed",
                    )
                )
            return row.key

    # ---- decisions, events, policy state ---------------------------------------------------------
    def policy_states(self) -> dict[str, tuple[PolicyState, int]]:
        with self.sessions() as s:
            rows = s.scalars(select(PolicyStateRecord)).all()
            return {r.tier: (PolicyState.from_dict(r.state), r.desired) for r in rows}

    @staticmethod
    def save_policy_state(session: Session, tier: str, state: PolicyState, desired: int, now: float) -> None:
        row = session.get(PolicyStateRecord, tier)
        if row is None:
            session.add(PolicyStateRecord(tier=tier, state=state.to_dict(), desired=desired, updated_at=now))
        else:
            row.state, row.desired, row.updated_at = state.to_dict(), desired, now

    def decisions(self, tier: str | None = None, limit: int = 50, since: float | None = None) -> list[DecisionRecord]:
        return self._recent(DecisionRecord, tier, limit, since)

    def demand_samples(self, since: float) -> Sequence[tuple[str, float, float]]:
        """(tier, t, demand) recorded since ``since``, oldest first: seeds the seasonal forecast history."""
        with self.sessions() as s:
            q = (
                select(DecisionRecord.tier, DecisionRecord.t, DecisionRecord.demand)
                .where(DecisionRecord.t >= since, DecisionRecord.demand.is_not(None))
                .order_by(DecisionRecord.t)
            )
            return [(tier, t, float(d)) for tier, t, d in s.execute(q).all() if d is not None]

    def events(self, tier: str | None = None, limit: int = 50, since: float | None = None) -> list[EventRecord]:
        return self._recent(EventRecord, tier, limit, since)

    def _recent(self, model: type[R], tier: str | None, limit: int, since: float | None) -> list[R]:
        """The newest ``limit`` rows (of one tier, since a time), returned oldest first."""
        with self.sessions() as s:
            q = select(model)
            if tier is not None:
                q = q.where(model.tier == tier)
            if since is not None:
                q = q.where(model.t >= since)
            rows = s.scalars(q.order_by(model.t.desc(), model.id.desc()).limit(limit)).all()
            return list(reversed(rows))

    def prune(self, before: float) -> int:
        """Drop decisions and events older than ``before`` (retention); instances are kept."""
        with self.sessions.begin() as s:
            removed = 0
            for model in (DecisionRecord, EventRecord):
                result: Any = s.execute(delete(model).where(model.t < before))
                removed += int(result.rowcount or 0)
            return removed
