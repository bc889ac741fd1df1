"""`scalectl <command>` imports only that command's module: `status` on an up-to-date database loads neither
Alembic, the simulator, the provider adapters nor the signal readers, and on SQLite not even SQLAlchemy or
rich (bench/bench_cli_start.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

from scalectl.cli.main import COMMANDS, SUMMARIES, build_app
from scalectl.controller.store.migrate import head_revision
from scalectl.controller.store.open import script_heads

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "tiers.yaml"
PROBE = """
import json, sys
from scalectl.cli.main import main
sys.argv = ["scalectl", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = (
    "alembic", "scalectl.simulator", "numpy", "scalectl.providers", "httpx", "redis", "celery",
    "scalectl.tiers.config", "sqlalchemy", "rich", "matplotlib", "optuna",
)
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


def _loaded(tmp_path: Path, *args: str) -> list[str]:
    env = {"SCALECTL_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


def test_status_on_an_up_to_date_database_loads_nothing_heavy(tmp_path: Path) -> None:
    assert "alembic" in _loaded(tmp_path, "status")  # a new database: migrated once
    assert _loaded(tmp_path, "status") == ["rich"]  # the table needs rich, SQLite needs no SQLAlchemy
    assert _loaded(tmp_path, "status", "-o", "json") == []
    assert "scalectl.simulator" in _loaded(tmp_path, "simulate", "--help")  # the probe can see heavy imports


def test_status_of_an_applied_config_parses_it_and_loads_nothing_else_heavy(tmp_path: Path) -> None:
    assert "sqlalchemy" in _loaded(tmp_path, "apply", "-f", str(EXAMPLE))
    # The tiers-file models validate the stored config; the store is read with sqlite3, no SQLAlchemy.
    assert _loaded(tmp_path, "status", "-o", "json") == ["scalectl.providers", "scalectl.tiers.config"]


def test_the_command_map_names_every_registered_command() -> None:
    app = build_app()
    click_app = typer.main.get_command(app)
    assert set(click_app.commands) == set(COMMANDS)  # type: ignore[attr-defined]


def test_the_light_head_check_agrees_with_alembic(tmp_path: Path) -> None:
    from scalectl.controller.store.db import make_engine

    assert script_heads() == {head_revision(make_engine(f"sqlite:///{tmp_path / 'x.db'}"))}


HELP_PROBE = """
import json, sys
from scalectl.cli.main import COMMAND_MODULES, main
sys.argv = ["scalectl", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = [*COMMAND_MODULES, "pydantic", "sqlalchemy", "yaml", "scalectl.controller.settings", "scalectl.tiers"]
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


def _loaded_by(tmp_path: Path, *args: str, **env: str) -> list[str]:
    full = {"SCALECTL_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **env}
    done = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


def test_help_version_and_completing_a_command_name_import_no_command_module(tmp_path: Path) -> None:
    assert _loaded_by(tmp_path, "--help") == []
    assert _loaded_by(tmp_path) == []  # no arguments: the help
    assert _loaded_by(tmp_path, "--version") == []
    # Completing, typer itself validates its parameters with pydantic: nothing of ours is loaded.
    bash = {"_SCALECTL_COMPLETE": "complete_bash", "COMP_WORDS": "scalectl ap", "COMP_CWORD": "1"}
    assert set(_loaded_by(tmp_path, **bash)) <= {"pydantic"}
    zsh = {"_SCALECTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "scalectl sta"}
    assert set(_loaded_by(tmp_path, **zsh)) <= {"pydantic"}
    # The probe sees imports: completing a command's options loads that command's module (and only it).
    options = {"_SCALECTL_COMPLETE": "complete_bash", "COMP_WORDS": "scalectl apply --", "COMP_CWORD": "2"}
    assert "scalectl.cli.config_cmds" in _loaded_by(tmp_path, **options)
    assert "scalectl.cli.simulate_cmd" not in _loaded_by(tmp_path, **options)


def test_the_summary_table_says_what_each_command_says() -> None:
    import inspect

    commands = typer.main.get_command(build_app()).commands  # type: ignore[attr-defined]
    assert list(SUMMARIES) == list(commands)  # the help's order
    for name, command in commands.items():
        own = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
        assert SUMMARIES[name] == own, name
