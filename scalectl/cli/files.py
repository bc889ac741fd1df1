"""The one spelling of a tiers file option, ``-f/--file``, everywhere (``--filename`` and ``--config``, the
spellings some commands had, still work and are hidden), and the completion of tier names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scalectl.cli.output import EXIT_USAGE, fail


def file_option(help: str, *, required: bool = True) -> Any:
    """``-f/--file``: optional to typer so a hidden old spelling can stand in; ``chosen_file`` requires it."""
    return typer.Option(None, "--file", "-f", help=f"{help}{' Required.' if required else ''}")


def old_spelling(name: str) -> Any:
    """An earlier spelling of ``--file`` (``--filename``, ``--config``), accepted and not shown in --help."""
    return typer.Option(None, name, hidden=True, help="Old spelling of --file.")


def chosen_file(file: Path | None, *old: Path | None, required: bool = True) -> Path | None:
    given = [p for p in (file, *old) if p is not None]
    if len(given) > 1:
        fail("give the tiers file once, with -f/--file", EXIT_USAGE)
    if not given and required:
        fail("missing the tiers file: add -f/--file PATH", EXIT_USAGE)
    return given[0] if given else None


def tier_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """TAB after a tier name's place: the tiers of the file given with -f (read as YAML, not validated), else
    of the stored configuration on a SQLite store (read with sqlite3). Cheap, and silent: a shell
    completion has nowhere to print a problem, so anything unreadable completes nothing."""
    file = next((ctx.params.get(k) for k in ("file", "filename", "config") if ctx.params.get(k)), None)
    try:
        names = _file_tiers(Path(file)) if file else _stored_tiers()
    except Exception:  # completion only: the command itself reports the same problem when it runs
        names = []
    return sorted(n for n in names if n.startswith(incomplete))


def _file_tiers(path: Path) -> list[str]:
    from scalectl.tiers.yaml_bounded import safe_load

    data = safe_load(path.read_text(encoding="utf-8"))
    tiers = data.get("tiers") if isinstance(data, dict) else None
    return [str(n) for n in tiers] if isinstance(tiers, dict) else []


def _stored_tiers() -> list[str]:
    from scalectl.controller.settings import Settings
    from scalectl.controller.views.status_reads import open_sqlite_reads

    reads = open_sqlite_reads(Settings().resolved_database_url())
    if reads is None:  # not a SQLite file at the current schema: no database round trip on a TAB
        return []
    try:
        return reads.tier_names()
    finally:
        reads.close()
