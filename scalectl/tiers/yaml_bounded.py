"""YAML for user files with a nesting bound: PyYAML builds documents recursively, so a file nested a few
hundred levels deep would raise RecursionError (a traceback) instead of a clear error."""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 64  # far deeper than any tiers or workload file; far below Python's recursion limit


class TooDeep(ValueError):
    def __init__(self, line: int, column: int, depth: int):
        self.line, self.column = line, column
        super().__init__(
            f"line {line}, column {column}: nested more than {depth} levels deep; "
            "this is not a tiers file — flatten the structure (tiers need at most a few levels)"
        )


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Raise TooDeep at the first collection nested deeper than ``max_depth`` (the event parser is iterative)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                mark = event.start_mark
                line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
                raise TooDeep(line, column, max_depth)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def safe_load(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``yaml.safe_load`` that raises TooDeep (a ValueError) instead of recursing without bound."""
    check_depth(text, max_depth)
    return yaml.safe_load(text)
