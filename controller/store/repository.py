"""The store's operations, in the words the controller uses. One short transaction per call."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, Select, delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.db import make_sessionmaker
from scalectl.controller.store.history import failure_history
from scalectl.controller.store.instances import LIVE_STATES, live_groups_query
from scalectl.controller.store.live_rows import LiveRowsCache
from scalectl.controller.store.models import (
    ConfigVersion,
    DecisionRecord,
    EventRecord,
    InstanceRecord,
    PolicyStateRecord,
    RolloutRecord,
    TierRequestsRecord,
)
from scalectl.controller.store.stored_config import parse_stored, tier_spec_json
from scalectl.controller.store.unit_of_work import UnitOfWork, save_policy_state
from scalectl.controller.unit_cost import BilledSpan
from scalectl.domain.failures import FailureHistory
from scalectl.domain.instance import InstanceState
from scalectl.domain.rollout import RolloutControl
from scalectl.policies.types import PolicyState

if TYPE_CHECKING:  # the tiers-file models load lazily: read-only commands (`scalectl status`) never need them
    from scalectl.tiers.config import FleetConfig, TierSpec

R = TypeVar("R", DecisionRecord, EventRecord)


REQUEST_COUNTS_KEPT = 86400.0  # seconds of per-minute request counts kept (the last hour is what is read)
__all__ = ["LIVE_STATES", "BilledSpan", "Store", "TierChange", "diff_config", "tier_spec_json"]


@functools.cache
def _latest_version_query() -> Select[Any]:
    return select(func.max(ConfigVersion.version))


@dataclass(frozen=True)
class TierChange:
    tier: str
    change: str  # "added" | "changed" | "removed" | "unchanged"
    before: dict[str, Any] | None
    after: dict[str, Any] | None


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


def _parse_version(version: ConfigVersion | None) -> FleetConfig | None:
    return None if version is None else parse_stored(version.text, version.version)


class NoticeMismatch(ValueError):
    """An interruption notice whose provider account or instance id is not the named instance's."""


class Store:
    def __init__(self, engine: Engine, *, sole_writer: bool = False):
        """``sole_writer``: nothing but this object writes the database (the simulator's private one), so
        the configuration and rollout controls are read once and kept until it changes them itself, and the
        live instance rows until a write to them (``LiveRowsCache``). The
        daemon's store is not: `scalectl apply` and `scalectl rollout` write from other processes."""
        self.engine = engine
        self.sessions: sessionmaker[Session] = make_sessionmaker(engine)
        self.sole_writer = sole_writer
        self._config_cache: tuple[int | None, FleetConfig | None] | None = None
        self._rollouts_cache: dict[str, RolloutControl] | None = None
        self._live_rows = LiveRowsCache(engine) if sole_writer else None  # the instance rows between ticks

    # ---- configuration ---------------------------------------------------------------------------
    # One stored form (the text of each applied version), one read route (``fleet_config``, parsed once
    # per version): tiers, tier specs and providers are all read from it.
    def fleet_config(self) -> FleetConfig | None:
        """The last applied configuration (tiers and providers), or None before the first apply. Every
        change comes with a new config version, so the parsed config is kept until the latest version
        moves (one scalar query per call; none for a sole writer)."""
        if self.sole_writer and self._config_cache is not None:
            return self._config_cache[1]
        version = self.config_version()
        cached = self._config_cache
        if cached is not None and cached[0] == version:
            return cached[1]
        with self.sessions() as s:
            latest = s.scalars(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(1)).first()
            fleet = _parse_version(latest)
            self._config_cache = (latest.version if latest is not None else None, fleet)
            return fleet

    def active_tiers(self) -> dict[str, TierSpec]:
        """The tiers of the applied configuration."""
        fleet = self.fleet_config()
        return dict(fleet.tiers) if fleet is not None else {}

    def removed_tier_specs(self, names: Iterable[str], versions: int = 100) -> dict[str, TierSpec]:
        """The last applied spec of each named tier the current configuration no longer has (its drain
        timeout still governs its instances), looking back at most ``versions`` versions."""
        from scalectl.tiers.errors import ConfigError

        wanted, found = set(names), {}
        with self.sessions() as s:
            for stored in s.scalars(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(versions)):
                if not wanted:
                    break
                try:
                    tiers = _parse_version(stored).tiers  # type: ignore[union-attr]  # a stored version parses
                except ConfigError:  # written by an older release in a form this one refuses: look further back
                    continue
                found.update({name: tiers[name] for name in wanted & set(tiers)})
                wanted -= set(found)
        return found

    def tier_specs(self) -> dict[str, dict[str, Any]]:
        """The active tiers in their canonical JSON form (what `diff` and `get tiers` show)."""
        return {name: tier_spec_json(spec) for name, spec in self.active_tiers().items()}

    def live_tier_names(self) -> set[str]:
        """Tiers with an instance that may bill (a tier gone from the configuration still drains)."""
        with self.engine.connect() as conn:
            query = select(InstanceRecord.tier).where(InstanceRecord.state.in_(LIVE_STATES)).distinct()
            return set(conn.scalars(query))

    def config_version(self) -> int | None:
        with self.engine.connect() as conn:  # a plain read, no ORM session: the reconciler asks every tick
            version: int | None = conn.scalar(_latest_version_query())
            return version

    def apply_config(
        self, fleet: FleetConfig, text: str, source: str, now: float
    ) -> tuple[int | None, list[TierChange]]:
        """Store a new version when anything changed; returns (version or None if unchanged, changes)."""
        from scalectl.tiers.config import config_digest

        self._config_cache = None
        with self.sessions.begin() as s:
            latest = s.scalars(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(1)).first()
            before = _parse_version(latest)
            current = {n: tier_spec_json(t) for n, t in before.tiers.items()} if before is not None else {}
            changes = diff_config(current, fleet)
            same_text = latest is not None and latest.digest == config_digest(text)
            if same_text or (
                latest is not None and all(c.change == "unchanged" for c in changes) and latest.text == text
            ):
                return None, changes
            # A new version even when every tier is unchanged: the file changed (comments, providers block).
            version = ConfigVersion(applied_at=now, source=source[:500], digest=config_digest(text), text=text)
            s.add(version)
            s.flush()
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
    def unit_of_work(self) -> UnitOfWork:
        """A session with the repositories on it; nothing is stored until ``commit``."""
        return UnitOfWork(self.sessions, self._live_rows)

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

    def live_by_state(self, tiers: Collection[str] | None = None) -> list[tuple[str, str, int, float, float]]:
        """Live instances per (tier, state): how many, the $/hour they bill, the oldest ``created_at`` (the
        metrics after every tick; one grouped query however large the fleet). ``tiers``: only these."""
        with self.engine.connect() as conn:
            rows = conn.execute(live_groups_query(tiers=tiers)).all()
        return [(t, state, int(n), float(spend or 0.0), float(oldest)) for t, state, _surge, n, spend, oldest in rows]

    # ---- rollouts ----------------------------------------------------------------------------------
    def rollout_controls(self) -> dict[str, RolloutControl]:
        """Per tier, what `scalectl rollout` set (tiers never touched have no entry: generation 0, running)."""
        if self.sole_writer and self._rollouts_cache is not None:
            return dict(self._rollouts_cache)
        with self.engine.connect() as conn:  # a plain read, no ORM session: the reconciler asks every tick
            rows = conn.execute(select(RolloutRecord.tier, RolloutRecord.generation, RolloutRecord.paused)).all()
        controls = {tier: RolloutControl(generation, bool(paused)) for tier, generation, paused in rows}
        self._rollouts_cache = controls if self.sole_writer else None
        return dict(controls)

    def set_rollout(
        self, tier: str, now: float, *, restart: bool = False, paused: bool | None = None
    ) -> RolloutControl:
        """`scalectl rollout restart|pause|resume`: a new generation (every instance drifts) and/or the pause
        flag; recorded as an event."""
        self._rollouts_cache = None
        with self.sessions.begin() as s:
            row = s.get(RolloutRecord, tier)
            if row is None:
                row = RolloutRecord(tier=tier, generation=0, paused=False, updated_at=now)
                s.add(row)
            if restart:
                row.generation += 1
            if paused is not None:
                row.paused = paused
            row.updated_at = now
            what = "restart" if restart else ("paused" if paused else "resumed")
            s.add(
                EventRecord(
                    t=now, tier=tier, kind=f"rollout-{what}", message=f"rollout {what} (generation {row.generation})"
                )
            )
            return RolloutControl(row.generation, row.paused)

    def failed_with_server(self, tier: str, server: str) -> str | None:
        """The key of an instance of ``tier`` launched with ``server`` that failed, if any."""
        i = InstanceRecord
        query = select(i.key).where(i.tier == tier, i.server_hash == server, i.state == InstanceState.FAILED.value)
        with self.sessions() as s:
            return s.scalars(query.limit(1)).first()

    def server_hashes(self, tier: str) -> dict[str | None, int]:
        """How many live instances of ``tier`` run each server (``None``: launched before hashes were kept)."""
        i = InstanceRecord
        with self.sessions() as s:
            rows = s.execute(
                select(i.server_hash, func.count())
                .where(i.tier == tier, i.state.in_(LIVE_STATES))
                .group_by(i.server_hash)
            ).all()
        return {h: int(n) for h, n in rows}

    def instances_billed_since(self, start: float) -> list[BilledSpan]:
        """Every instance that billed at some point since ``start``: its tier, from when, until when (None:
        still billing) and at what $/hour."""
        i = InstanceRecord
        begun = func.coalesce(i.launched_at, i.created_at)
        with self.sessions() as s:
            rows = s.execute(
                select(i.tier, begun, i.ended_at, i.price_per_hour).where(
                    i.provider_id.is_not(None), (i.ended_at.is_(None)) | (i.ended_at >= start)
                )
            ).all()
        return [BilledSpan(tier, launched, ended, price) for tier, launched, ended, price in rows]

    def failure_history(self, since: float) -> FailureHistory:
        """Interruptions, refused creates and create back-offs the store recorded: what the reconciler's
        back-offs are rebuilt from when the daemon starts."""
        with self.sessions() as s:
            return failure_history(s, since)

    def mark_notice(self, provider: str, provider_id: str | None, key: str | None, now: float) -> str | None:
        """Record an interruption notice from a webhook; returns the instance key it matched, if any.

        A notice naming an instance (by key) of another provider account, or another provider id
        than the instance has, changes nothing and raises NoticeMismatch."""
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
            if row.provider != provider or (provider_id and row.provider_id and row.provider_id != provider_id):
                raise NoticeMismatch(
                    f"the notice names {provider} {provider_id or ''}".rstrip()
                    + f" but instance {row.key} is {row.provider} {row.provider_id or '(not created yet)'}"
                )
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
        save_policy_state(session, tier, state, desired, now)

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
        """Drop decisions and events older than ``before`` (retention); instances are kept. Request counts
        are kept a day at most: only the last hour's are ever read."""
        with self.sessions.begin() as s:
            removed = 0
            for model in (DecisionRecord, EventRecord):
                result: Any = s.execute(delete(model).where(model.t < before))
                removed += int(result.rowcount or 0)
            oldest = int(max(before, self._newest_minute(s) * 60.0 - REQUEST_COUNTS_KEPT) // 60)
            result = s.execute(delete(TierRequestsRecord).where(TierRequestsRecord.minute < oldest))
            return removed + int(result.rowcount or 0)

    @staticmethod
    def _newest_minute(s: Session) -> int:
        return int(s.scalar(select(func.max(TierRequestsRecord.minute))) or 0)

    def requests_by_minute(self, start: float, end: float) -> dict[str, dict[int, float]]:
        """Per tier, the requests its signals counted in each minute of [start, end)."""
        rows = TierRequestsRecord
        first, last = int(start // 60), int(end // 60)
        found: dict[str, dict[int, float]] = {}
        with self.sessions() as s:
            query = select(rows.tier, rows.minute, rows.requests).where(rows.minute >= first, rows.minute < last)
            for tier, minute, requests in s.execute(query):
                found.setdefault(tier, {})[minute] = requests
        return found
