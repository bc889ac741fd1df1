"""`scalectl status`, `describe tier`, `events`: what the fleet is doing and why."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from scalectl.cli.context import open_store, settings, user_errors
from scalectl.cli.files import tier_names
from scalectl.cli.output import EXIT_NO_DAEMON, EXIT_USAGE, Format, OutputOption, emit, fail, option_duration
from scalectl.clocks import SystemClock
from scalectl.controller.settings import Settings
from scalectl.controller.store.world_clock import world_now
from scalectl.controller.views.ages import ago
from scalectl.controller.views.controls import with_controls
from scalectl.controller.views.status import COLUMNS, mix_text, status_document

if TYPE_CHECKING:  # the store (SQLAlchemy) loads in the commands: `status` on SQLite reads without it
    from scalectl.controller.ha.replica_view import ReplicaView
    from scalectl.controller.store.repository import Store
    from scalectl.controller.store.world_clock import WorldClock
    from scalectl.controller.views.status import FleetReads
    from scalectl.domain.tier_control import TierControl


def _now(store: Store) -> float:
    """Now in the daemon's world (accelerated under `daemon --speed`), the frame the rows were stamped in."""
    return world_now(store, SystemClock().now())


def _window(window: str | None) -> float | None:
    return None if window is None else option_duration(window, "--since")


def _status_document(s: Settings) -> dict[str, Any]:
    """The document GET /v1/status answers. An up-to-date SQLite file is read through sqlite3 (no SQLAlchemy
    import: the command starts in half the time); anything else through the store, which migrates."""
    from scalectl.controller.views.controls import sqlite_controls
    from scalectl.controller.views.status_reads import open_sqlite_reads

    stale_after = 3 * s.leader_lease_ttl
    reads = open_sqlite_reads(s.resolved_database_url())
    if reads is not None:
        try:
            return _document(reads, reads.replicas(), reads.world_clock(), stale_after, sqlite_controls(reads.conn))
        finally:
            reads.close()
    from scalectl.controller.ha.replica import read_replicas
    from scalectl.controller.store import world_clock

    store = open_store(s)
    controls = store.controls.controls()
    return _document(store.reads, read_replicas(store.engine), world_clock.read(store), stale_after, controls)


def _document(
    reads: FleetReads,
    view: ReplicaView,
    clock: WorldClock | None,
    stale_after: float,
    controls: Mapping[str, TierControl],
) -> dict[str, Any]:
    wall = SystemClock().now()
    world = wall if clock is None else clock.now(wall)
    published = None if clock is None else clock.wall_at
    document = status_document(reads, view, wall, stale_after, world_now=world, last_published=published)
    return with_controls(document, controls, world)


def register(app: typer.Typer) -> None:
    describe_app = typer.Typer(help="Show one resource in detail.", no_args_is_help=True)
    app.add_typer(describe_app, name="describe")

    @app.command()
    def status(output: Format = OutputOption) -> None:
        """Per tier: desired / ready / pending / draining and $/hour; the leader and the replicas. Exit 4 when
        no daemon is running (the figures are what it last stored)."""
        with user_errors():
            document = _status_document(settings())
        daemon = document["daemon"]
        if output is not Format.table:  # the same document as the daemon's GET /v1/status
            emit(document, output)
        else:
            if not daemon["running"]:
                typer.echo(_not_running(daemon), err=True)
            rows, columns = document["tiers"], COLUMNS
            if any("variants" in row for row in rows):  # tiers with variants: the mix of hardware they run
                rows = [{**row, "variants": mix_text(row.get("variants"))} for row in rows]
                columns = [*COLUMNS, "variants"]
            emit(rows, output, columns=columns, title=None if daemon["running"] else "stale")
            for row in document["tiers"]:
                if row.get("control") is not None:
                    typer.echo(f"{row['tier']}: {row['control']['summary']}")
            _print_replicas(document, output)
        if not daemon["running"]:
            raise typer.Exit(EXIT_NO_DAEMON)

    def _print_replicas(document: dict[str, Any], output: Format) -> None:
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
        name: str = typer.Argument(..., autocompletion=tier_names),
        output: Format = OutputOption,
        decisions: int = typer.Option(10, help="How many recent decisions to show."),
    ) -> None:
        """Policy, latest signals (and source errors), instances and recent decisions of one tier."""
        from scalectl.controller.views.describe import UnknownTier, describe_tier

        with user_errors():
            store = open_store(settings())
            try:
                data = describe_tier(store, name, _now(store), decisions=decisions)
            except UnknownTier as exc:
                fail(str(exc), EXIT_USAGE)
        spec, status, signals, held_by = data["spec"], data["status"], data["signals"], data["signal_sources"]
        capacity, batch_view, rollout = data["capacity"], data["batch"], data["rollout"]
        errors, error_counts = data["signal_errors"], data["signal_error_counts"]
        if output is not Format.table:
            emit(data, output)
            return
        policy = spec.get("policy", {})
        listed = spec.get("variants") or []
        also = ", ".join(f"{v.get('gpu_count', 1)}× {v.get('gpu')}" for v in listed)
        typer.echo(
            f"Tier {name}: {spec.get('capacity')} {spec.get('gpu')}{f' (variants: {also})' if also else ''} "
            f"[min {spec.get('min')}, max {spec.get('max')}]  policy {policy.get('kind')}"
        )
        if "variants" in status:
            status = {**status, "variants": mix_text(status["variants"])}
        emit(status, Format.table, title="status")
        shown_signals = {f"{k} (at the {held_by[k]})" if k in held_by else k: v for k, v in signals.items()}
        emit(shown_signals or {"(no signals recorded yet)": ""}, Format.table, title="latest signals")
        if capacity is not None:
            shown = {k: v for k, v in capacity.items() if k != "measures"}
            for name, m in capacity["measures"].items():
                err = m["forecast_error_p90"]
                shown[f"{name} per instance"] = f"{m['per_instance']:g} ({m['ratio_to_prior']:g}× prior): {m['why']}"
                shown[f"{name} forecast error p90"] = "not measured yet" if err is None else f"{err:g}"
            emit(shown, Format.table, title="capacity per instance (target mode)")
        if batch_view is not None:
            emit(batch_view, Format.table, title="batch sizing (max_wait): learned")
        if rollout is not None:
            emit(rollout, Format.table, title="rollout (scalectl rollout status)")
        if data["control"] is not None:
            typer.echo(f"control: {data['control']['summary']}")
        if errors:
            emit(errors, Format.table, title="signal source errors (last reading)")
        if error_counts:
            emit(error_counts, Format.table, title="signal source failures since the daemon started")
        emit(
            data["instances"],
            Format.table,
            title="instances",
            columns=[
                "key",
                "state",
                "provider",
                "capacity",
                "gpu",
                "gpu_count",
                "region",
                "price_per_hour",
                "age",
                "reason",
            ],
        )
        emit(data["decisions"], Format.table, title="recent decisions", columns=["age", "current", "desired", "reason"])

    @app.command()
    def events(
        tier: str | None = typer.Option(None, help="Only this tier.", autocompletion=tier_names),
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
            decisions = store.records.decisions(tier, limit=limit, since=start)
            happenings = store.records.events(tier, limit=limit, since=start)
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
                [{**r, "t": ago(now - r["t"]) + " ago"} for r in rows],
                output,
                columns=["t", "tier", "kind", "what"],
            )
        else:
            emit(rows, output)


def _not_running(daemon: dict[str, Any]) -> str:
    if daemon["last_seen"] is None:
        return "no daemon is running (none has run on this store): the table is the applied configuration only"
    return (
        f"no daemon is running: last seen {ago(daemon['data_age_s'])} ago ({_iso(daemon['last_seen'])}); "
        f"the table is stale, what it stored then"
    )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
