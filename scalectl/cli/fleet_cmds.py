"""`scalectl status`, `describe tier`, `events`: what the fleet is doing and why."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from scalectl.cli.context import open_store, settings, user_errors
from scalectl.cli.output import EXIT_USAGE, Format, OutputOption, emit, fail
from scalectl.clocks import SystemClock
from scalectl.controller.settings import Settings
from scalectl.controller.store.world_clock import world_now
from scalectl.controller.views.status import COLUMNS, fleet_status, status_document
from scalectl.policies.durations import parse_duration
from scalectl.policies.types import PolicyState

if TYPE_CHECKING:  # the store (SQLAlchemy) loads in the commands: `status` on SQLite reads without it
    from scalectl.controller.store.repository import Store


def _ago(seconds: float) -> str:
    # Rows written by an earlier, faster demo can lie ahead of a later daemon's clock: never a negative age.
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _now(store: Store) -> float:
    """Now in the daemon's world (accelerated under `daemon --speed`), the frame the rows were stamped in."""
    return world_now(store, SystemClock().now())


def _window(window: str | None) -> float | None:
    if window is None:
        return None
    try:
        return parse_duration(window)
    except ValueError as exc:
        fail(f"--since: {exc}", EXIT_USAGE)


def _status_document(s: Settings) -> dict[str, Any]:
    """The document GET /v1/status answers. An up-to-date SQLite file is read through sqlite3 (no SQLAlchemy
    import: the command starts in half the time); anything else through the store, which migrates."""
    from scalectl.controller.views.status_reads import open_sqlite_reads

    stale_after = 3 * s.leader_lease_ttl
    reads = open_sqlite_reads(s.resolved_database_url())
    if reads is not None:
        try:
            wall, view = SystemClock().now(), reads.replicas()
            return status_document(reads, view, wall, stale_after, world_now=reads.world_now(wall))
        finally:
            reads.close()
    from scalectl.controller.ha.replica import read_replicas

    store = open_store(s)
    wall, view = SystemClock().now(), read_replicas(store.engine)
    return status_document(store, view, wall, stale_after, world_now=_now(store))


def _names_a_source(spec: dict[str, Any]) -> bool:
    block = spec.get("signals") or {}
    return bool(block.get("queue") or block.get("metrics") or block.get("endpoints"))


def _no_source() -> str:
    from scalectl.sources.spec import NO_SOURCE

    return NO_SOURCE


def register(app: typer.Typer) -> None:
    describe_app = typer.Typer(help="Show one resource in detail.", no_args_is_help=True)
    app.add_typer(describe_app, name="describe")

    @app.command()
    def status(output: Format = OutputOption) -> None:
        """Per tier: desired / ready / pending / draining and $/hour; the leader and the replicas."""
        with user_errors():
            document = _status_document(settings())
        if output is not Format.table:  # the same document as the daemon's GET /v1/status
            emit(document, output)
            return
        emit(document["tiers"], output, columns=COLUMNS)
        if document["replicas"]:
            replicas = [
                {**r, "started": _iso(r["started_at"]), "tiers": _tiers_acted_on(r)} for r in document["replicas"]
            ]
            emit(replicas, output, columns=["role", "host", "pid", "started", "seen_ago", "http", "tiers"])
            leader = document["leader"]
            if leader is not None:
                typer.echo(f"leader: {leader['host']} pid {leader['pid']}, epoch {leader['epoch']}")

    def _tiers_acted_on(replica: dict[str, Any]) -> int | str:
        if replica["sharded"]:
            return len(replica["tiers"])
        return "all" if replica["role"] == "leader" else 0

    @describe_app.command("tier")
    def describe_tier(
        name: str,
        output: Format = OutputOption,
        decisions: int = typer.Option(10, help="How many recent decisions to show."),
    ) -> None:
        """Policy, latest signals (and source errors), instances and recent decisions of one tier."""
        with user_errors():
            store = open_store(settings())
            specs = store.tier_specs()
            if name not in specs:
                fail(f'unknown tier "{name}"; tiers: {", ".join(sorted(specs)) or "(none applied)"}', EXIT_USAGE)
            recent = store.decisions(name, limit=decisions)
            instances = store.instances(name)
            status = next((r for r in fleet_status(store, _now(store)) if r["tier"] == name), {})
            from scalectl.controller.capacity_view import (  # tiers-file models: describe only
                learned_batch,
                learned_capacity,
            )
            from scalectl.tiers.config import TierSpec

            now = _now(store)
            state = store.policy_states().get(name, (PolicyState(), None))[0]
            tier_spec = TierSpec.model_validate(specs[name])
            capacity = learned_capacity(tier_spec, state)
            batch_view = learned_batch(tier_spec, state)
            from scalectl.controller.rollout_status import rollout_status

            rollout = rollout_status(store, name)
        last = recent[-1] if recent else None
        signals = dict(last.signals) if last else {}
        errors = signals.pop("errors", {})
        error_counts = signals.pop("error_counts", {})
        held_by = signals.pop("sources", {})  # figures the activator gave (a tier at zero)
        if not any(v is not None for v in signals.values()) and not _names_a_source(specs[name]):
            errors = {**errors, "signals": _no_source()}
        data = {
            "tier": name,
            "spec": specs[name],
            "status": status,
            "signals": signals,
            "signal_errors": errors,
            "signal_error_counts": error_counts,
            "signal_sources": held_by,
            "capacity": capacity,
            "batch": batch_view,
            "rollout": rollout,
            "instances": [
                {
                    "key": i.key,
                    "state": i.state,
                    "provider": i.provider,
                    "capacity": i.capacity,
                    "gpu": i.gpu,
                    "region": i.region,
                    "price_per_hour": i.price_per_hour,
                    "age": _ago(now - i.created_at),
                    "reason": i.reason,
                }
                for i in instances
            ],
            "decisions": [
                {"age": _ago(now - d.t), "current": d.current, "desired": d.desired, "reason": d.reason} for d in recent
            ],
        }
        if output is not Format.table:
            emit(data, output)
            return
        policy = specs[name].get("policy", {})
        typer.echo(
            f"Tier {name}: {specs[name].get('capacity')} {specs[name].get('gpu')} "
            f"[min {specs[name].get('min')}, max {specs[name].get('max')}]  policy {policy.get('kind')}"
        )
        emit(status, Format.table, title="status")
        shown_signals = {f"{k} (at the {held_by[k]})" if k in held_by else k: v for k, v in signals.items()}
        emit(shown_signals or {"(no signals recorded yet)": ""}, Format.table, title="latest signals")
        if capacity is not None:
            shown = {k: v for k, v in capacity.items() if k not in ("observations", "small_fleets")}
            small = "; ".join(f"{f['ready']} ready: {f['breached_from']:g}" for f in capacity["small_fleets"])
            shown["small fleets breached from"] = small or "none seen"
            emit(shown, Format.table, title="capacity per instance (target tracking)")
        if batch_view is not None:
            emit(batch_view, Format.table, title="batch sizing (max_wait): learned")
        if rollout is not None:
            emit(rollout, Format.table, title="rollout (scalectl rollout status)")
        if errors:
            emit(errors, Format.table, title="signal source errors (last reading)")
        if error_counts:
            emit(error_counts, Format.table, title="signal source failures since the daemon started")
        emit(
            data["instances"],
            Format.table,
            title="instances",
            columns=["key", "state", "provider", "capacity", "region", "price_per_hour", "age", "reason"],
        )
        emit(data["decisions"], Format.table, title="recent decisions", columns=["age", "current", "desired", "reason"])

    @app.command()
    def events(
        tier: str | None = typer.Option(None, help="Only this tier."),
        since: str | None = typer.Option(None, help='Only this recent, e.g. "1h".'),
        limit: int = typer.Option(50, help="At most this many of each kind."),
        output: Format = OutputOption,
    ) -> None:
        """Decisions (with their reasons) and instance events, oldest first."""
        window = _window(since)
        with user_errors():
            store = open_store(settings())
            now = _now(store)
            start = None if window is None else now - window
            decisions = store.decisions(tier, limit=limit, since=start)
            happenings = store.events(tier, limit=limit, since=start)
        rows: list[dict[str, Any]] = [
            {"t": d.t, "tier": d.tier, "kind": "decision", "what": f"{d.current} → {d.desired}: {d.reason}"}
            for d in decisions
        ]
        rows += [
            {
                "t": e.t,
                "tier": e.tier or "-",
                "kind": e.kind,
                "what": f"{e.instance_key + ': ' if e.instance_key else ''}{e.message}",
            }
            for e in happenings
        ]
        rows.sort(key=lambda r: r["t"])
        if output is Format.table:
            emit(
                [{**r, "t": _ago(now - r["t"]) + " ago"} for r in rows],
                output,
                columns=["t", "tier", "kind", "what"],
            )
        else:
            emit(rows, output)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
