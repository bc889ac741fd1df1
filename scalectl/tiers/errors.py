"""Errors a person can fix, shared by modules that must stay light to import (the CLI's error handling)."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration problem a person can fix. ``str()`` is one line per problem."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))
