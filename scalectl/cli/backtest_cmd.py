"""``scalectl backtest``: replay a signal timeline through the tiers' policies, offline."""

from __future__ import annotations

from pathlib import Path

import typer

from scalectl.cli.output import EXIT_USAGE, Format, OutputOption, emit, fail
from scalectl.controller.backtest import BacktestInputError, rows_for_table, run_backtest_file
from scalectl.tiers.config import ConfigError


def backtest(
    file: Path = typer.Option(..., "--file", "-f", help="Tiers file (tiers.yaml) with the policies to replay."),
    signals: Path = typer.Option(
        ..., "--signals", "-s", help='JSON lines: {"t": ..., "tier": ..., "queue_depth": ..., ...} per tick.'
    ),
    output: Format = OutputOption,
) -> None:
    """Replay recorded signals through each tier's policy and print what it would have decided, and why."""
    try:
        rows = run_backtest_file(file, signals)
    except (ConfigError, BacktestInputError) as exc:
        fail(str(exc), EXIT_USAGE)
    if output is Format.table:
        emit(rows_for_table(rows), output, columns=["t", "tier", "desired", "reason"], title="backtest")
    else:
        emit(rows, output)


def register(app: typer.Typer) -> None:
    app.command("backtest")(backtest)
