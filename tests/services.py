"""Local services for integration tests: reach them, start them if they are down, or fail loudly.

Never skip silently: a test that needs PostgreSQL, Redis or RabbitMQ and cannot get one fails with the
command that would have started it. The test workers run in parallel (pytest-xdist): one process at a time
starts a service, under ``services_lock``, and the others find it up.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

PG_URL = os.environ.get("SCALECTL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

START = {
    "postgresql": [
        ["bash", "-c", "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql | head -1) main start"]
    ],
    "redis": [
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "-::1",
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            "/var/lib/redis",
            "--logfile",
            "/var/log/redis/ci.log",
        ]
    ],
    "rabbitmq": [["rabbitmq-server", "-detached"]],
}
PORTS = {"postgresql": 5432, "redis": 6379, "rabbitmq": 5672}


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def services_lock() -> Iterator[None]:
    """Held while a service is started or reconfigured, across processes: two test workers that both find
    RabbitMQ down would otherwise both start it."""
    with (Path(tempfile.gettempdir()) / "scalectl-test-services.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_service(name: str, wait_seconds: float = 60.0) -> None:
    """Make sure ``name`` answers on its port, starting it if needed; raise with the reason otherwise."""
    if _port_open(PORTS[name]):
        return
    with services_lock():
        _start_service(name, wait_seconds)


def _start_service(name: str, wait_seconds: float) -> None:
    port = PORTS[name]
    if _port_open(port):  # another worker started it while this one waited for the lock
        return
    errors = []
    for cmd in START[name]:
        if name == "postgresql" and not glob.glob("/etc/postgresql/*"):
            errors.append("PostgreSQL is not installed (no /etc/postgresql)")
            break
        try:
            subprocess.run(cmd, check=False, capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(f"{' '.join(cmd)}: {exc}")
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if _port_open(port):
            return
        time.sleep(0.5)
    raise RuntimeError(
        f"{name} is not reachable on 127.0.0.1:{port} and could not be started "
        f"({'; '.join(errors) or 'started, but it never answered'}). Start it with: {' '.join(START[name][0])}"
    )


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A fresh PostgreSQL database (started if down) for one test or benchmark, dropped afterwards even
    while connections to it remain; yields its URL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    ensure_service("postgresql")
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
