"""The ``scalectl`` entry point. Command groups register themselves from their own modules."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="scalectl",
    help="GPU fleet autoscaler for LLM agent fleets.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """GPU fleet autoscaler for LLM agent fleets."""
    # A callback keeps `scalectl <command>` a command group even while only one command is registered.


# Modules with a ``register(app)`` function, in help order.
COMMAND_MODULES = [
    "controller.cli.config_cmds",
    "controller.cli.fleet_cmds",
    "controller.cli.backtest_cmd",
    "controller.cli.signals_cmd",
    "controller.cli.sizing_cmds",
    "controller.cli.offers_cmd",
    "controller.cli.simulate_cmd",
    "controller.cli.tune_cmd",
    "controller.cli.daemon_cmd",
    "controller.cli.db_cmds",
]


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command group is not built yet
                continue
            raise
        module.register(app)


_register_all()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
