"""`scalectl scale TIER N [--for D] | --clear`, `scalectl pause TIER`, `scalectl resume TIER`: the operator's
hand on a tier's desired count. The commands write to the store; the daemon (wherever it runs) acts on its
next tick, and says so in every decision's reason while the control holds."""

from __future__ import annotations

import typer

from scalectl.cli.context import open_store, settings, user_errors
from scalectl.cli.files import tier_names
from scalectl.cli.output import EXIT_USAGE, fail, option_duration
from scalectl.controller.store.repository import Store

TierArgument = typer.Argument(..., help="Tier name.", autocompletion=tier_names)


def _known(store: Store, tier: str) -> None:
    specs = store.config.tier_specs()
    if tier not in specs:
        fail(f'unknown tier "{tier}"; tiers: {", ".join(sorted(specs)) or "(none applied)"}', EXIT_USAGE)


def _now(store: Store) -> float:
    """The daemon's world time: an override's expiry is on the clock that honours it."""
    from scalectl.clocks import SystemClock
    from scalectl.controller.store.world_clock import world_now

    return world_now(store, SystemClock().now())


def register(app: typer.Typer) -> None:
    @app.command()
    def scale(
        tier: str = TierArgument,
        count: int | None = typer.Argument(None, help="The desired count to hold (clamped to max and budget)."),
        for_: str | None = typer.Option(None, "--for", help='Hold it this long, e.g. "1h"; default: until cleared.'),
        clear: bool = typer.Option(False, "--clear", help="Drop the override: the policy decides again."),
    ) -> None:
        """Override a tier's desired count (until --clear, or for --for); its policy still runs and is shown."""
        if clear == (count is not None):
            fail("give a count (scalectl scale TIER N) or --clear, not both or neither", EXIT_USAGE)
        if count is not None and count < 0:
            fail(f"count: expected 0 or more instances, got {count}", EXIT_USAGE)
        if clear and for_ is not None:
            fail("--for goes with a count, not with --clear", EXIT_USAGE)
        duration = None
        if for_ is not None:
            duration = option_duration(for_, "--for")
            if duration <= 0:
                fail(f'--for: expected a positive duration, e.g. "1h", got "{for_}"', EXIT_USAGE)
        with user_errors():
            store = open_store(settings())
            _known(store, tier)
            now = _now(store)
            until = None if duration is None else now + duration
            control = store.controls.set_override(tier, count, until, now)
        typer.echo(f"{tier}: {control.describe_override()}" if count is not None else f"{tier}: override cleared")

    def _pause(tier: str, paused: bool) -> None:
        with user_errors():
            store = open_store(settings())
            _known(store, tier)
            store.controls.set_paused(tier, paused, _now(store))
        typer.echo(f"{tier}: {'paused: the desired count holds' if paused else 'resumed: the policy decides'}")

    @app.command()
    def pause(tier: str = TierArgument) -> None:
        """Hold a tier's desired count (its policy still runs and is recorded; failed instances are replaced)."""
        _pause(tier, True)

    @app.command()
    def resume(tier: str = TierArgument) -> None:
        """Let a paused tier's policy set its desired count again."""
        _pause(tier, False)
