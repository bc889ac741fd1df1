"""The ``scalectl`` entry point. Command groups register themselves from their own modules.

A command line names one command: only that command's module is imported (the others pull in the
simulator, the provider adapters, the signal readers), so `scalectl status` starts in a fraction of the
time. `scalectl --help`, `--version` and the completion of a command name import none of them: they read
``SUMMARIES``, a static table (tests/unit/cli/test_lazy_start.py keeps it equal to the commands' own help).
``app`` (tests, embedding) gets every command."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Iterable
from typing import Any

import typer

# Command (or group) name -> the module whose ``register(app)`` defines it.
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
    "scale": "scalectl.cli.control_cmds",
    "pause": "scalectl.cli.control_cmds",
    "resume": "scalectl.cli.control_cmds",
    "report": "scalectl.cli.report_cmd",
}
COMMAND_MODULES = list(dict.fromkeys(COMMANDS.values()))

# What `scalectl --help` lists, in its order: each command's first help paragraph, as its module says it.
SUMMARIES = {
    "apply": "Validate a tiers file and store it as a new configuration version (only if it changed).",
    "diff": "Show what `apply` would change. Exit 0: no changes; 3: there are changes; 2: invalid file.",
    "status": "Per tier: desired / ready / pending / draining and $/hour; the leader and the replicas. Exit 4 "
    "when no daemon is running (the figures are what it last stored).",
    "events": "Decisions (with their reasons) and instance events, oldest first.",
    "backtest": "Replay recorded signals through each tier's policy and print what it would have decided, and why.",
    "signals": "Read each tier's queue depth and vLLM metrics once and print them (null = unknown).",
    "plan": "KV bytes per token, slots per GPU, GPUs for S sessions and $/hour.",
    "vllm-args": "The tuned `vllm serve` command line for a tier (-o json adds the reason for each flag).",
    "offers": "Offers from every provider of a tiers file (or of the applied configuration): provider, GPU, "
    "count, region, $/h, availability.",
    "simulate": "Replay a workload through the tiers' policies, the reconciler and a simulated cloud; report SLO "
    "and cost.",
    "tune": "Find the cheapest policy settings whose simulated SLO attainment meets --slo; print them as YAML.",
    "daemon": "Run the autoscaler. With no configuration: the bundled example tiers on the simulated cloud, "
    "with a synthetic load, printing every decision.",
    "schema": "Print the JSON Schema (draft 2020-12) of the tiers file (docs/configuration.md#editor-support).",
    "spot-agent": "Print the on-instance agent that posts signed interruption notices (AWS IMDSv2, GCP metadata).",
    "scale": "Override a tier's desired count (until --clear, or for --for); its policy still runs and is shown.",
    "pause": "Hold a tier's desired count (its policy still runs and is recorded; failed instances are replaced).",
    "resume": "Let a paused tier's policy set its desired count again.",
    "report": "What the tiers would have run and cost beside what the current fleet ran and cost.",
    "get": "List resources.",
    "describe": "Show one resource in detail.",
    "db": "Database schema migrations.",
    "rollout": "Roll a tier's instances to its current server description.",
}


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


def _new_app() -> typer.Typer:
    app = typer.Typer(
        name="scalectl",
        help="GPU fleet autoscaler for LLM agent fleets.",
        no_args_is_help=True,
        pretty_exceptions_show_locals=False,
        add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    )
    app.callback()(_root)
    return app


def build_app(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    app = _new_app()
    for name in modules:
        importlib.import_module(name).register(app)
    return app


def _listed(ctx: typer.Context) -> None:  # never runs: a command line naming a command gets the real one
    raise AssertionError(f"{ctx.info_name}: the summary table stood in for a command that was run")


def summary_app() -> typer.Typer:
    """The root and every command's name and summary, no command module imported: `--help`, `--version`,
    the completion of a command name, an unknown command's error."""
    app = _new_app()
    for name, summary in SUMMARIES.items():
        app.command(name, help=summary, add_help_option=False)(_listed)
    return app


def _named_module(words: list[str]) -> str | None:
    """The module of the first word naming a command; None when none does."""
    return next((COMMANDS[w] for w in words if not w.startswith("-") and w in COMMANDS), None)


def _completed_words(env: dict[str, str]) -> list[str] | None:
    """While the shell asks for completions (typer's protocol, ``_SCALECTL_COMPLETE`` set): the words typed in
    full before the one being completed, without the program's name; None otherwise."""
    if not any(key.endswith("_COMPLETE") for key in env):
        return None
    if "COMP_WORDS" in env:  # bash: the whole line and the index of the word being completed
        words = _split(env["COMP_WORDS"])
        return words[1 : int(env.get("COMP_CWORD") or len(words))]
    line = env.get("_TYPER_COMPLETE_ARGS", "")  # zsh, fish, PowerShell: the line up to the cursor
    words = _split(line)
    return words[1:] if line.endswith(" ") else words[1:-1]


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # an open quote while typing
        return line.split()


def _app_for(argv: list[str], env: dict[str, str]) -> typer.Typer:
    words = _completed_words(env)
    module = _named_module(argv if words is None else words)
    return summary_app() if module is None else build_app([module])


_app: typer.Typer | None = None


def __getattr__(name: str) -> Any:  # `from cli.main import app`: every command, built once
    global _app
    if name == "app":
        if _app is None:
            _app = build_app()
        return _app
    raise AttributeError(name)


def main() -> None:
    _app_for(sys.argv[1:], dict(os.environ))(prog_name="scalectl")


if __name__ == "__main__":
    main()
