"""What pyproject.toml promises: every core dependency is imported by the package (or named below with the
reason it is not), and every `scalectl[extra]` the docs tell people to install exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SOURCES = [ROOT / "scalectl", ROOT / "controller", ROOT / "providers", ROOT / "policies", ROOT / "migrations"]
IMPORT_NAMES = {"pyyaml": "yaml", "prometheus-client": "prometheus_client", "python-json-logger": "pythonjsonlogger"}
# Core dependencies no module imports by name, and why they are core all the same.
LOADED_BY_NAME = {"psycopg": "SQLAlchemy loads it for postgresql+psycopg:// database URLs"}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match is not None
    return match.group(0).lower()


def _imported() -> set[str]:
    found: set[str] = set()
    for folder in SOURCES:
        for path in folder.rglob("*.py"):
            found |= set(re.findall(r"^\s*(?:import|from) ([A-Za-z_][A-Za-z0-9_]*)", path.read_text(), re.M))
    return found


def test_every_core_dependency_is_imported_or_says_why_not() -> None:
    imported = _imported()
    unused = [
        name
        for name in map(_name, PROJECT["dependencies"])
        if IMPORT_NAMES.get(name, name.replace("-", "_")) not in imported and name not in LOADED_BY_NAME
    ]
    assert unused == [], f"core dependencies nothing imports: {unused}; move them to an extra or the dev deps"


def test_every_extra_the_docs_name_exists() -> None:
    extras = set(PROJECT["optional-dependencies"])
    named: set[str] = set()
    for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for group in re.findall(r"scalectl\[([a-z0-9_,\s-]+)\]", path.read_text()):
            named |= {e.strip() for e in group.split(",")}
    assert named and named <= extras, f"extras the docs name but pyproject.toml lacks: {sorted(named - extras)}"
