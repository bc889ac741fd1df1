"""`scalectl apply`, `diff` and `get tiers`: the tier configuration, validated and versioned."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scalectl.cli.context import open_store, settings, user_errors
from scalectl.cli.files import chosen_file, file_option, old_spelling
from scalectl.cli.output import EXIT_DIFF, EXIT_OK, Format, OutputOption, emit

# The store (SQLAlchemy) and the tiers-file models load when a command runs, not when the shell completes its
# options: `scalectl apply --<TAB>` only needs the parameters declared below.
if TYPE_CHECKING:
    from scalectl.controller.store.repository import Store
    from scalectl.tiers.config import FleetConfig

FILE_HELP = "Tiers YAML file."


def _summary(spec: dict[str, Any]) -> str:
    policy = spec.get("policy", {})
    return f"{policy.get('kind')} {spec.get('capacity')} {spec.get('gpu')} [{spec.get('min')}..{spec.get('max')}]"


def _warn(fleet: FleetConfig, source: Path) -> None:
    from scalectl.tiers.config import model_warnings

    for warning in model_warnings(fleet, str(source)):
        typer.echo(f"warning: {warning}", err=True)


def _checked(file: Path | None, filename_: Path | None) -> tuple[Path, FleetConfig, str, Store]:
    """What `apply` and `diff` start from: the file they were given, validated (warnings printed), and the
    store it is compared with."""
    from scalectl.tiers.config import load_config

    filename = chosen_file(file, filename_)
    assert filename is not None
    fleet, text = load_config(filename)
    _warn(fleet, filename)
    return filename, fleet, text, open_store(settings())


def register(app: typer.Typer) -> None:
    get_app = typer.Typer(help="List resources.", no_args_is_help=True)
    app.add_typer(get_app, name="get")

    @app.command()
    def apply(
        file: Path | None = file_option(FILE_HELP),
        output: Format = OutputOption,
        filename_: Path | None = old_spelling("--filename"),
    ) -> None:
        """Validate a tiers file and store it as a new configuration version (only if it changed)."""
        from scalectl.clocks import SystemClock

        with user_errors():
            filename, fleet, text, store = _checked(file, filename_)
            version, changes = store.config.apply(fleet, text, str(filename), SystemClock().now())
        rows = [{"tier": c.tier, "change": c.change} for c in changes]
        if output is Format.table:
            if version is None:
                typer.echo(f"{filename}: unchanged (config v{store.config.version()})")
            else:
                typer.echo(f"{filename}: applied as config v{version}")
            for c in changes:
                if c.change != "unchanged":
                    typer.echo(f"  tier {c.tier}: {c.change}")
            return
        emit({"version": version or store.config.version(), "changed": version is not None, "tiers": rows}, output)

    @app.command()
    def diff(
        file: Path | None = file_option(FILE_HELP),
        output: Format = OutputOption,
        filename_: Path | None = old_spelling("--filename"),
    ) -> None:
        """Show what `apply` would change. Exit 0: no changes; 3: there are changes; 2: invalid file."""
        import yaml

        from scalectl.controller.store.repository import diff_config
        from scalectl.sources.redact import mask_secrets

        with user_errors():
            filename, fleet, _, store = _checked(file, filename_)
            changes = diff_config(store.config.diff_base(), fleet)
        changed = [c for c in changes if c.change != "unchanged"]
        if output is Format.table:
            if not changed:
                typer.echo("no changes")
            for c in changed:
                before = yaml.safe_dump(mask_secrets(c.before), sort_keys=True).splitlines() if c.before else []
                after = yaml.safe_dump(mask_secrets(c.after), sort_keys=True).splitlines() if c.after else []
                typer.echo(f"tier {c.tier}: {c.change}")
                for line in difflib.unified_diff(before, after, "stored", str(filename), lineterm="", n=2):
                    typer.echo(f"  {line}")
        else:
            emit([{"tier": c.tier, "change": c.change, "before": c.before, "after": c.after} for c in changed], output)
        raise typer.Exit(EXIT_DIFF if changed else EXIT_OK)

    @get_app.command("tiers")
    def get_tiers(output: Format = OutputOption) -> None:
        """The tiers of the stored configuration."""
        with user_errors():
            store = open_store(settings())
            specs = store.config.tier_specs()
            fleet = store.config.fleet_config()
            version = store.config.version()
        if output is Format.table:
            emit(
                [
                    {
                        "tier": n,
                        "policy": _summary(s),
                        "providers": ",".join(s.get("providers", [])),
                        "config": f"v{version}",
                    }
                    for n, s in sorted(specs.items())
                ],
                output,
            )
        else:
            emit(_stored_document(version, fleet), output)


def _stored_document(version: int | None, fleet: FleetConfig | None) -> dict[str, Any]:
    """The stored configuration as a tiers file `apply -f` takes back (every field, defaults included;
    ``version`` is read-only and ignored by apply; secrets are masked by ``emit``)."""
    if fleet is None:
        return {"version": version, "tiers": {}}
    document: dict[str, Any] = json.loads(fleet.model_dump_json(by_alias=True, exclude_none=False))
    if not document.get("providers"):
        document.pop("providers", None)
    if document.get("budget_per_hour") is None:
        document.pop("budget_per_hour", None)
    return {"version": version, **document}
