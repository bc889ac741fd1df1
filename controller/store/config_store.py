"""The configuration in the store: one stored form (the text of each applied version), one read route
(``fleet_config``, parsed once per version); tiers, tier specs and providers are all read from it."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, Select, func, select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.models import ConfigVersion, EventRecord
from scalectl.controller.store.stored_config import parse_stored, tier_spec_json

if TYPE_CHECKING:  # the tiers-file models load lazily: read-only commands (`scalectl status`) never need them
    from scalectl.tiers.config import FleetConfig, TierSpec


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


def _latest(session: Session) -> ConfigVersion | None:
    """The last applied version's row (None before the first apply)."""
    return session.scalars(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(1)).first()


def _parse_version(version: ConfigVersion | None) -> FleetConfig | None:
    return None if version is None else parse_stored(version.text, version.version)


def _stored_tiers(version: ConfigVersion | None) -> dict[str, dict[str, Any]]:
    """A stored version's tiers in canonical form, to diff a new version against. One written under settings
    this release refuses (a retired setting) reads as its tier names alone, so each shows as changed and a
    corrected file can be applied over it (the daemon refuses to run such a version, and says to apply one)."""
    import yaml

    from scalectl.tiers.errors import ConfigError

    try:
        before = _parse_version(version)
    except ConfigError:
        assert version is not None
        document = yaml.safe_load(version.text)
        tiers = document.get("tiers") if isinstance(document, dict) else None
        return {str(name): {} for name in tiers or {}} if isinstance(tiers, dict) else {}
    return {n: tier_spec_json(t) for n, t in before.tiers.items()} if before is not None else {}


class ConfigStore:
    """Applied configuration versions. ``sole_writer``: nothing else writes the database (the simulator), so
    the parsed configuration is kept until this object applies another."""

    def __init__(self, engine: Engine, sessions: sessionmaker[Session], *, sole_writer: bool = False):
        self.engine = engine
        self.sessions = sessions
        self.sole_writer = sole_writer
        self._cache: tuple[int | None, FleetConfig | None] | None = None

    def fleet_config(self) -> FleetConfig | None:
        """The last applied configuration (tiers and providers), or None before the first apply. Every
        change comes with a new config version, so the parsed config is kept until the latest version
        moves (one scalar query per call; none for a sole writer)."""
        if self.sole_writer and self._cache is not None:
            return self._cache[1]
        version = self.version()
        cached = self._cache
        if cached is not None and cached[0] == version:
            return cached[1]
        with self.sessions() as s:
            latest = _latest(s)
            fleet = _parse_version(latest)
            self._cache = (latest.version if latest is not None else None, fleet)
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

    def diff_base(self) -> dict[str, dict[str, Any]]:
        """What a new file is compared with (`diff`, `apply`): the latest version's tiers, canonical; a version
        this release refuses reads as its tier names alone (``_stored_tiers``)."""
        with self.sessions() as s:
            latest = _latest(s)
            return _stored_tiers(latest)

    def version(self) -> int | None:
        with self.engine.connect() as conn:  # a plain read, no ORM session: the reconciler asks every tick
            version: int | None = conn.scalar(_latest_version_query())
            return version

    def apply(self, fleet: FleetConfig, text: str, source: str, now: float) -> tuple[int | None, list[TierChange]]:
        """Store a new version when anything changed; returns (version or None if unchanged, changes)."""
        from scalectl.tiers.config import config_digest

        self._cache = None
        with self.sessions.begin() as s:
            latest = _latest(s)
            current = _stored_tiers(latest)
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
