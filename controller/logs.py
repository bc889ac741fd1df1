"""Daemon logging: one record per line, text or JSON, ISO-8601 timestamps with the zone. The timestamp is
always the wall clock; under ``--speed`` each line also carries the demo world's time as ``world_time``
(the one that explains the decisions), from the moment the demo clock is set. Decision lines carry
``tier``, ``current``, ``desired`` and ``reason`` as fields of their own (top-level keys in JSON)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum

LEVELS = ("debug", "info", "warning", "error")
QUIET = ("httpx", "httpcore", "uvicorn", "alembic")


class LogFormat(StrEnum):
    text = "text"
    json = "json"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds")


class _Stamps(logging.Filter):
    """Adds ``wall_time`` (ISO-8601) and, when the world runs faster than the wall, ``world_time`` (None
    while ``world_now`` answers None: the demo clock is not set yet)."""

    def __init__(self, world_now: Callable[[], float | None] | None, speed: float):
        super().__init__()
        self.world_now = world_now
        self.speed = speed

    def filter(self, record: logging.LogRecord) -> bool:
        record.wall_time = iso(record.created)
        world = self.world_now() if self.world_now is not None else None
        record.world_time = iso(world) if world is not None else None
        record.speed = self.speed
        return True


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        world = getattr(record, "world_time", None)
        demo = f" [world {world}, demo ×{record.speed:g}]" if world else ""  # type: ignore[attr-defined]
        line = f"{record.wall_time} {record.levelname:<7}{demo} {record.getMessage()}"  # type: ignore[attr-defined]
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _json_formatter() -> logging.Formatter:
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter(
        "%(wall_time)s %(levelname)s %(name)s %(message)s %(world_time)s",
        rename_fields={"wall_time": "time", "levelname": "level", "name": "logger"},
    )


def setup_logging(
    level: str,
    fmt: LogFormat = LogFormat.text,
    world_now: Callable[[], float | None] | None = None,
    speed: float = 1.0,
) -> None:
    """Configure the root logger. ``world_now`` is the demo clock when it runs faster than the wall (None
    until it is set)."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level {level!r}: use one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_Stamps(world_now if speed != 1.0 else None, speed))
    handler.setFormatter(_json_formatter() if fmt is LogFormat.json else _TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    for noisy in QUIET:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "skipped: already running" is by design
