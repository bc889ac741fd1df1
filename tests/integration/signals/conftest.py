"""Local services for the signal tests: Redis and RabbitMQ must be up (we try to start them; never skip)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid

import httpx
import pytest

from tests.services import ensure_service, services_lock

REDIS_DB = 11  # never db 0: other people's tests share this Redis
RABBIT_MANAGEMENT = "http://127.0.0.1:15672"


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _service(name: str) -> None:
    try:
        ensure_service(name)
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def redis_url() -> str:
    _service("redis")
    return f"redis://127.0.0.1:6379/{REDIS_DB}"


@pytest.fixture(scope="session")
def rabbit_url() -> str:
    _service("rabbitmq")
    return "amqp://guest:guest@127.0.0.1:5672//"


@pytest.fixture(scope="session")
def rabbit_management(rabbit_url: str) -> str:
    """Enables the management plugin when it is off (it ships with RabbitMQ); one test worker at a time."""
    if not _port_open(15672) and shutil.which("rabbitmq-plugins"):
        with services_lock():
            if not _port_open(15672):
                subprocess.run(["rabbitmq-plugins", "enable", "rabbitmq_management"], check=False, timeout=120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{RABBIT_MANAGEMENT}/api/overview", auth=("guest", "guest"), timeout=2).status_code == 200:
                return RABBIT_MANAGEMENT
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail("the RabbitMQ management API is not answering on :15672 (rabbitmq-plugins enable rabbitmq_management)")


@pytest.fixture
def unique() -> str:
    return f"sigtest-{uuid.uuid4().hex[:10]}"
