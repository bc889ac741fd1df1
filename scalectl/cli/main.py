"""The ``scalectl`` entry point. Command groups register themselves from their own modules.

A command line names one command: only that command's module is imported (the others pull in the
simulator, the provider adapters, the signal readers), so `scalectl status` starts in a fraction of the
time. `scalectl --help`, completion and ``app`` (tests, embedding) get every command."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from typing import Any

import typer

# Command (or group) name -> the module whose ``register(app)`` defines it, in help order.
COMMANDS = {
    "apply": "scalectl.cli.config_cmds",
    "diff": "scalectl.cli.config_cmds",
    "get": "scalectl.cli.config_cmds",
    "status": "scalectl.cli.fleet_cmds",
    "events": "scalectl.cli.fleet_cmds",
    "describe": "scalectl.cli.fleet_cmds",
    "backtest": "scalectl.cli.backtest_cmd",
    "signals": "scalectl.cli.signals_cmd",
    "plan": "scalectl.cli.sizing_cmds",
    "vllm-args": "scalectl.cli.sizing_cmds",
    "offers": "scalectl.cli.offers_cmd",
    "simulate": "scalectl.cli.simulate_cmd",
    "tune": "scalectl.cli.tune_cmd",
    "daemon": "scalectl.cli.daemon_cmd",
    "db": "scalectl.cli.db_cmds",
    "schema": "scalectl.cli.schema_cmd",
    "spot-agent": "scalectl.cli.agent_cmd",
    "rollout": "scalectl.cli.rollout_cmd",
}
COMMAND_MODULES = list(dict.fromkeys(COMMANDS.values()))


def _print_version(value: bool) -> None:
    if value:
        from scalectl.controller.version import scalectl_version

        typer.echo(f"scalectl {scalectl_version()}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """GPU fleet autoscaler for LLM agent fleets."""
    # A callback keeps `scalectl <command>` a command group even while only one command is registered.


def build_app(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    app = typer.Typer(
        name="scalectl",
        help="GPU fleet autoscaler for LLM agent fleets.",
        no_args_is_help=True,
        pretty_exceptions_show_locals=False,
        add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    )
    app.callback()(_root)
    for name in modules:
        importlib.import_module(name).register(app)
    return app


def _requested_module(argv: list[str]) -> str | None:
    """The module of the command named on the command line; None when all are needed (help, completion)."""
    if any(key.endswith("_COMPLETE") for key in os.environ):
        return None
    first = next((a for a in argv if not a.startswith("-")), None)
    return COMMANDS.get(first) if first is not None else None


_app: typer.Typer | None = None


def __getattr__(name: str) -> Any:  # `from cli.main import app`: every command, built once
    global _app
    if name == "app":
        if _app is None:
            _app = build_app()
        return _app
    raise AttributeError(name)


def main() -> None:
    module = _requested_module(sys.argv[1:])
    build_app([module] if module is not None else COMMAND_MODULES)(prog_name="scalectl")


if __name__ == "__main__":
    main()
