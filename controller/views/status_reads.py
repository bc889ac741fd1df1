"""`scalectl status` on SQLite without SQLAlchemy: the reads of a status document (controller.views.status) as the
same queries through the standard library's sqlite3. Importing SQLAlchemy alone takes longer than the
whole command may (bench/bench_cli_start.py).

Only for a plain SQLite file already at the migration scripts' head: ``open_sqlite_reads`` returns None
otherwise (a new or older database, an in-memory or unusual URL, any error opening it), and the command
goes the ORM way, which migrates and reports errors as every other command does. tests/unit/cli/
test_status_reads.py checks that both ways build the same document."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from scalectl.controller.ha.lease import GLOBAL_LEASE, Lease
from scalectl.controller.ha.replica_view import ReplicaSeen, ReplicaView
from scalectl.controller.ha.shards import TIER_LEASE_PREFIX
from scalectl.controller.store.revisions import script_heads
from scalectl.controller.store.stored_config import parse_stored, tier_spec_json
from scalectl.controller.store.world_clock import DAEMON, WorldClock
from scalectl.controller.unit_cost import BilledSpan
from scalectl.domain.instance import LIVE
from scalectl.policies.types import PolicyState

# Store.instances' filter, spelled out: fixed enum values, so they can be literals.
_LIVE = ", ".join(f"'{s.value}'" for s in sorted(LIVE, key=lambda s: s.value))


@dataclass(frozen=True, slots=True)
class InstanceRow:
    tier: str
    state: str
    price_per_hour: float
    storage_per_hour: float
    gpu: str = ""
    gpu_count: int = 1


def sqlite_file(url: str) -> str | None:
    """The file of a plain ``sqlite:///path`` URL; None for anything SQLAlchemy might read differently
    (a driver suffix, query options, %-escapes, in-memory)."""
    prefix = "sqlite:///"
    path = url[len(prefix) :] if url.startswith(prefix) else ""
    if not path or path == ":memory:" or any(c in path for c in "?%#"):
        return None
    return path


def open_sqlite_reads(url: str) -> SqliteStatusReads | None:
    """Reads over ``url`` through sqlite3 when it is a SQLite file at the scripts' head, else None."""
    path = sqlite_file(url)
    if path is None:
        return None
    try:
        conn = sqlite3.connect(path, timeout=30)  # the engine's busy timeout (controller.store.db)
    except sqlite3.Error:
        return None
    try:
        # The engine's connect pragmas, so a read here leaves the file as the ORM's would.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        current = {row[0] for row in conn.execute("SELECT version_num FROM alembic_version")}
    except sqlite3.Error:  # no alembic_version table yet, a locked or broken file: the ORM way says why
        conn.close()
        return None
    if current != script_heads():
        conn.close()
        return None
    return SqliteStatusReads(conn)


class SqliteStatusReads:
    """``scalectl.controller.views.status.FleetReads`` (and the replicas and the world clock) over one sqlite3
    connection: each method is the query its ``Store`` counterpart runs."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        return self.conn.execute(sql, params or {}).fetchall()

    def tier_specs(self) -> dict[str, dict[str, Any]]:
        rows = self._rows("SELECT version, text FROM config_versions ORDER BY version DESC LIMIT 1")
        if not rows:
            return {}
        version, text = rows[0]
        return {name: tier_spec_json(spec) for name, spec in parse_stored(text, version).tiers.items()}

    def tier_names(self) -> list[str]:
        """The tier names of the stored configuration, read from its YAML without validating it (shell
        completion: cheap)."""
        from scalectl.tiers.yaml_bounded import safe_load

        rows = self._rows("SELECT text FROM config_versions ORDER BY version DESC LIMIT 1")
        data = safe_load(rows[0][0]) if rows else None
        tiers = data.get("tiers") if isinstance(data, dict) else None
        return [str(name) for name in tiers] if isinstance(tiers, dict) else []

    def policy_states(self) -> dict[str, tuple[PolicyState, int]]:
        rows = self._rows("SELECT tier, state, desired FROM policy_state")
        return {tier: (PolicyState.from_dict(_json(state)), desired) for tier, state, desired in rows}

    def instances(self, *, limit: int) -> list[InstanceRow]:
        rows = self._rows(
            "SELECT tier, state, price_per_hour, storage_per_hour, gpu, gpu_count FROM instances "
            f"WHERE state IN ({_LIVE}) "
            "ORDER BY created_at DESC LIMIT :limit",
            {"limit": limit},
        )
        return [InstanceRow(*row) for row in rows]

    def requests_by_minute(self, start: float, end: float) -> dict[str, dict[int, float]]:
        found: dict[str, dict[int, float]] = {}
        query = "SELECT tier, minute, requests FROM tier_requests WHERE minute >= :first AND minute < :last"
        for tier, minute, requests in self._rows(query, {"first": int(start // 60), "last": int(end // 60)}):
            found.setdefault(tier, {})[minute] = requests
        return found

    def instances_billed_since(self, start: float) -> list[BilledSpan]:
        rows = self._rows(
            "SELECT tier, coalesce(launched_at, created_at), ended_at, price_per_hour FROM instances "
            "WHERE provider_id IS NOT NULL AND (ended_at IS NULL OR ended_at >= :start)",
            {"start": start},
        )
        return [BilledSpan(*row) for row in rows]

    def replicas(self) -> ReplicaView:
        """``scalectl.controller.ha.replica.read_replicas``."""
        seen = self._rows(
            "SELECT holder, host, pid, started_at, seen_at, http, sharded FROM replicas ORDER BY started_at"
        )
        columns = "SELECT name, holder, host, pid, epoch, acquired_at, renewed_at, expires_at FROM leader_leases "
        lease = self._rows(columns + "WHERE name = :name", {"name": GLOBAL_LEASE})
        tiers = self._rows(columns + "WHERE name LIKE :prefix", {"prefix": f"{TIER_LEASE_PREFIX}%"})
        replicas = [
            ReplicaSeen(h, host, pid, started, seen_at, http, bool(sh))
            for h, host, pid, started, seen_at, http, sh in seen
        ]
        return ReplicaView(Lease(*lease[0]) if lease else None, replicas, [Lease(*row) for row in tiers])

    def world_clock(self) -> WorldClock | None:
        """``scalectl.controller.store.world_clock.read``."""
        query = "SELECT speed, world_at, wall_at, running FROM world_clock WHERE name = :name"
        rows = self._rows(query, {"name": DAEMON})
        if not rows:
            return None
        speed, world_at, wall_at, running = rows[0]
        return WorldClock(speed, world_at, wall_at, bool(running))

    def world_now(self, wall: float) -> float:
        """``scalectl.controller.store.world_clock.world_now``."""
        clock = self.world_clock()
        return wall if clock is None else clock.now(wall)


def _json(value: str | None) -> Any:
    """A JSON column as SQLAlchemy returns it (SQL NULL is None)."""
    return None if value is None else json.loads(value)
