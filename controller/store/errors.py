"""Database errors as operators read them: one line, the driver's own first sentence."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError


def one_line(exc: BaseException) -> str:
    """``OperationalError: connection failed: … Connection refused`` — no hint lines, no traceback."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text = str(cause).strip()
    first = text.splitlines()[0][:200] if text else ""
    return f"{type(cause).__name__}: {first}" if first else type(cause).__name__
