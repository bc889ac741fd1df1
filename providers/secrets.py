"""Credentials that never print. Read from an environment variable or a file, never from tiers.yaml."""

from __future__ import annotations

import os
from pathlib import Path


class Secret:
    """A credential. ``str()``/``repr()`` show ``***``; ``reveal()`` is the only way to the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


class MissingCredential(Exception):
    """Raised with a message that names where the credential was looked for, never its value."""


def load_secret(*, env: str | None = None, file: str | Path | None = None, what: str = "API key") -> Secret:
    """Read a secret from ``file`` (first line, stripped) or the environment variable ``env``."""
    if file:
        path = Path(file).expanduser()
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise MissingCredential(f"{what}: cannot read the file {path}: {exc.strerror}") from None
        if not value:
            raise MissingCredential(f"{what}: the file {path} is empty")
        return Secret(value)
    if env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise MissingCredential(f"{what}: set the environment variable {env} (or give a key file)")
        return Secret(value)
    raise MissingCredential(f"{what}: no environment variable or file configured")
