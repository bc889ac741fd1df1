"""Check rendered user-data: the ``#cloud-config`` header, YAML, and a JSON schema of the keys we use.

``cloud-init schema`` is stricter and is used when installed (``cloud_init_schema_check``); it is not
required at runtime.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from importlib import resources
from typing import Any

import yaml


class InvalidUserData(ValueError):
    pass


def _schema() -> dict[str, Any]:
    text = resources.files("scalectl.serving.bootstrap").joinpath("cloud_config.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def validate_user_data(text: str) -> dict[str, Any]:
    """Parse and schema-check; returns the parsed document or raises InvalidUserData listing every problem."""
    import jsonschema

    if not text.startswith("#cloud-config\n"):
        raise InvalidUserData("user-data must start with a '#cloud-config' line")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidUserData(f"user-data is not valid YAML: {exc}") from None
    validator = jsonschema.Draft202012Validator(_schema())
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(doc)]
    if problems:
        raise InvalidUserData("user-data does not match the cloud-config schema: " + "; ".join(problems))
    result: dict[str, Any] = doc
    return result


def cloud_init_schema_check(text: str) -> tuple[bool, str] | None:
    """Run ``cloud-init schema -c`` when cloud-init is installed; None when it is not."""
    binary = shutil.which("cloud-init")
    if binary is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        proc = subprocess.run([binary, "schema", "-c", fh.name], capture_output=True, text=True, check=False)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()
