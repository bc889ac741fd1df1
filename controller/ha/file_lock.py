"""One daemon per SQLite file: an exclusive lock on ``<database>.daemon.lock`` naming the holder's PID.

SQLite has no server to hold a lease on, and two daemons on one file would each take the other's
instances for orphans. The lock is advisory (``flock``) and is released by the kernel when the process
dies, so a crashed daemon never blocks the next one.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


class DaemonAlreadyRunning(RuntimeError):
    pass


class SqliteDaemonLock:
    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".daemon.lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held open for the daemon's lifetime
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise DaemonAlreadyRunning(
                f"{self.database}: another scalectl daemon (PID {holder}) is running on this SQLite database; "
                "stop it first, or run several daemons on PostgreSQL (SCALECTL_DATABASE_URL), where one "
                "leads and the others stand by"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is None:
            return
        try:
            self._file.seek(0)
            self._file.truncate()
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        finally:
            self._file.close()
            self._file = None

    def __enter__(self) -> SqliteDaemonLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for in-memory or non-SQLite URLs)."""
    if not url.startswith("sqlite"):
        return None
    path = url.split(":///", 1)[1] if ":///" in url else ""
    if not path or path == ":memory:":
        return None
    return Path(path)
