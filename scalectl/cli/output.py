"""One way to print results: ``-o table|json|yaml``. Errors go to stderr with a non-zero exit."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from scalectl.sources.redact import mask_secrets

if TYPE_CHECKING:  # rich loads when a table or an error is printed: `status -o json` never needs it
    from rich.console import Console


class Format(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


# Exit codes scripts can trust.
EXIT_OK = 0
EXIT_ERROR = 1  # the operation failed (provider, store, runtime)
EXIT_USAGE = 2  # bad input: configuration, arguments, files; nothing was changed
EXIT_DIFF = 3  # `diff`: there are differences (like `diff(1)` returning 1, kept apart from errors)
EXIT_NO_DAEMON = 4  # `status`: no daemon is running; what it printed is the last stored state, stale

OutputOption = typer.Option(Format.table, "--output", "-o", help="Output format: table, json or yaml.")


def emit(data: Any, fmt: Format, *, columns: Sequence[str] | None = None, title: str | None = None) -> None:
    """Print ``data`` (a list of row dicts, or a dict) in the chosen format, secrets masked in every one."""
    data = mask_secrets(data)
    if fmt is Format.json:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        return
    if fmt is Format.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=max(Console().width, 120))
    if isinstance(data, Mapping):
        rows: list[Mapping[str, Any]] = [{"field": k, "value": v} for k, v in data.items()]
        columns = columns or ["field", "value"]
    else:
        rows = list(data)
        columns = columns or (list(rows[0].keys()) if rows else [])
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col)
    for row in rows:
        # Cells are data, not markup: a reason's "[out: …]" would otherwise be read as a style tag and dropped.
        table.add_row(*[escape(_cell(row.get(col))) for col in columns])
    console.print(table)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print a one-paragraph error to stderr and exit with ``code``."""
    from rich.console import Console
    from rich.markup import escape

    # The message is text, not markup: "[plot]" or "[simulated]" in it must print as written.
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def option_duration(text: str, option: str) -> float:
    """A duration option's value in seconds ("90s", "5m", "1h"), or a usage error naming the option."""
    from scalectl.policies.durations import parse_duration  # pydantic: loaded when an option holds a duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        fail(f"{option}: {exc}", EXIT_USAGE)


def report_console() -> Console:
    """Where `simulate` and `tune` print their tables: the terminal's width, or 100 columns when the output
    is piped or redirected (the width the tables are laid out to fit)."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=100)
