"""A policy a test steers from outside the daemon: the desired count is whatever integer a file holds.

Used as ``policy: {kind: external, class: "tests.e2e.steer:FilePolicy", options: {path: /tmp/.../target}}``.
A missing or unreadable file holds the current count (as a real policy holds on missing data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalectl.policies.types import Bounds, Signals


class FilePolicy:
    def __init__(self, options: dict[str, Any], bounds: Bounds | None) -> None:
        self.path = Path(str(options["path"]))

    def decide(self, now: float, signals: Signals, current: int) -> tuple[int, str]:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return current, f"{self.path} unreadable: hold"
        if not text.isdigit():
            return current, f"{self.path} holds {text[:20]!r}, not a count: hold"
        return int(text), f"steered by {self.path.name}"
