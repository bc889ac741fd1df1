"""`scalectl rollout status|restart|pause|resume TIER`: watch and steer a tier's rolling replacement. The
commands write to the store; the daemon (wherever it runs) acts on its next tick."""

from __future__ import annotations

import typer

from scalectl.cli.context import open_store, settings, user_errors
from scalectl.cli.files import tier_names
from scalectl.cli.output import EXIT_USAGE, Format, OutputOption, emit, fail
from scalectl.controller.store.repository import Store


def _known(store: Store, tier: str) -> None:
    specs = store.config.tier_specs()
    if tier not in specs:
        fail(f'unknown tier "{tier}"; tiers: {", ".join(sorted(specs)) or "(none applied)"}', EXIT_USAGE)


TierArgument = typer.Argument(..., help="Tier name.", autocompletion=tier_names)


def register(app: typer.Typer) -> None:
    rollout_app = typer.Typer(help="Roll a tier's instances to its current server description.", no_args_is_help=True)
    app.add_typer(rollout_app, name="rollout")

    @rollout_app.command("status")
    def status(tier: str = TierArgument, output: Format = OutputOption) -> None:
        """The server the tier should run, how many instances run it, how many drifted; paused or stopped."""
        from scalectl.controller.views.rollout_status import rollout_status

        with user_errors():
            store = open_store(settings())
            _known(store, tier)
            shown = rollout_status(store, tier)
        emit(shown or {}, output, title=f"rollout of {tier}")

    def _steer(tier: str, *, restart: bool = False, paused: bool | None = None) -> None:
        from scalectl.clocks import SystemClock
        from scalectl.controller.store.world_clock import world_now

        with user_errors():
            store = open_store(settings())
            _known(store, tier)
            control = store.rollouts.set(tier, world_now(store, SystemClock().now()), restart=restart, paused=paused)
        state = "paused" if control.paused else "running"
        typer.echo(f"{tier}: rollout generation {control.generation}, {state}")

    @rollout_app.command("restart")
    def restart(tier: str = TierArgument) -> None:
        """Replace every instance (e.g. after a driver update): a new generation makes them all drifted."""
        _steer(tier, restart=True)

    @rollout_app.command("pause")
    def pause(tier: str = TierArgument) -> None:
        """Take no further rollout step (instances already replacing finish)."""
        _steer(tier, paused=True)

    @rollout_app.command("resume")
    def resume(tier: str = TierArgument) -> None:
        """Carry on a paused rollout."""
        _steer(tier, paused=False)
