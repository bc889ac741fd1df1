"""One daemon per SQLite file: a second process is refused with the file and the holder's PID."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scalectl.controller.ha.file_lock import DaemonAlreadyRunning, SqliteDaemonLock, sqlite_path

HOLD = """
import sys, time
from pathlib import Path
from scalectl.controller.ha.file_lock import SqliteDaemonLock
lock = SqliteDaemonLock(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def test_a_second_process_is_refused_naming_the_file_and_pid(tmp_path: Path) -> None:
    db = tmp_path / "scalectl.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DaemonAlreadyRunning) as refused:
            SqliteDaemonLock(db).acquire()
        assert str(db) in str(refused.value) and f"PID {holder.pid}" in str(refused.value)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    with SqliteDaemonLock(db):  # the holder exited: the lock is free again
        pass


def test_the_lock_is_released_and_can_be_taken_again(tmp_path: Path) -> None:
    db = tmp_path / "scalectl.db"
    first = SqliteDaemonLock(db)
    first.acquire()
    first.release()
    second = SqliteDaemonLock(db)
    second.acquire()
    second.release()


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////var/lib/scalectl/scalectl.db", Path("/var/lib/scalectl/scalectl.db")),
        ("sqlite:///rel.db", Path("rel.db")),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("postgresql://x@127.0.0.1/test", None),
    ],
)
def test_sqlite_path(url: str, path: Path | None) -> None:
    assert sqlite_path(url) == path
