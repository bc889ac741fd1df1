"""The migration scripts' head revisions, read from their source: neither Alembic nor SQLAlchemy is
imported, so a command on an up-to-date database (the usual case) starts without them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from scalectl import migrations

_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=]+)?=\s*(.+?)\s*$", re.MULTILINE)


def script_heads(versions: Path | None = None) -> set[str]:
    """The head revisions of the migration scripts, read from their source without importing Alembic."""
    folder = versions or Path(migrations.__file__).parent / "versions"
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in folder.glob("*.py"):
        found = {m.group(1): m.group(2) for m in _ASSIGNMENT.finditer(script.read_text(encoding="utf-8"))}
        if "revision" not in found:
            continue
        revisions.add(ast.literal_eval(found["revision"]))
        down = ast.literal_eval(found.get("down_revision", "None"))
        parents.update([down] if isinstance(down, str) else list(down or ()))
    return revisions - parents
