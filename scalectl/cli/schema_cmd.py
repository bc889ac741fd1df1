"""`scalectl schema`: the JSON Schema of the tiers file, for editors and CI validation."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def schema(
        out: Path | None = typer.Option(None, "--out", help="Write to this file instead of standard output."),
    ) -> None:
        """Print the JSON Schema (draft 2020-12) of the tiers file (docs/configuration.md#editor-support)."""
        from scalectl.cli.output import EXIT_USAGE, fail
        from scalectl.tiers.schema import tiers_schema_text

        text = tiers_schema_text()
        if out is None:
            typer.echo(text, nl=False)
            return
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            fail(f"{out}: cannot write the schema: {exc.strerror}; choose a writable --out path", EXIT_USAGE)
