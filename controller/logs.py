"""Daemon logging: one record per line, text or JSON, ISO-8601 timestamps with the zone. Under
``--speed`` each line also carries the demo world's time, which is the one that explains the decisions."""

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
    """Adds ``wall_time`` (ISO-8601) and, when the world runs faster than the wall, ``world_time``."""

    def __init__(self, world_now: Callable[[], float] | None, speed: float):
        super().__init__()
        self.world_now = world_now
        self.speed = speed

    def filter(self, record: logging.LogRecord) -> bool:
        record.wall_time = iso(record.created)
        record.world_time = iso(self.world_now()) if self.world_now is not None else None
        record.speed = self.speed
        return True


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        world = getattr(record, "world_time", None)
        stamp = f"{world} (demo ×{record.speed:g})" if world else record.wall_time  # type: ignore[attr-defined]
        line = f"{stamp} {record.levelname:<7} {record.getMessage()}"
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
    level: str, fmt: LogFormat = LogFormat.text, world_now: Callable[[], float] | None = None, speed: float = 1.0
) -> None:
    """Configure the root logger. ``world_now`` is the demo clock when it runs faster than the wall."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level {level!r}: use one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_Stamps(world_now if speed != 1.0 else None, speed))
    handler.setFormatter(_json_formatter() if fmt is LogFormat.json else _TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    for noisy in QUIET:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "skipped: already running" is by design
