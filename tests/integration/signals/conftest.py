"""Local services for the signal tests: Redis and RabbitMQ must be up (we try to start them; never skip)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid

import httpx
import pytest

REDIS_DB = 11  # never db 0: other people's tests share this Redis
RABBIT_MANAGEMENT = "http://127.0.0.1:15672"


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_port(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _port_open(port):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="session")
def redis_url() -> str:
    if not _port_open(6379):
        if shutil.which("redis-server"):
            subprocess.run(["redis-server", "--daemonize", "yes"], check=False, timeout=20)
        if not _wait_port(6379, 15):
            pytest.fail("Redis is not running on 127.0.0.1:6379 and could not be started (redis-server)")
    return f"redis://127.0.0.1:6379/{REDIS_DB}"


@pytest.fixture(scope="session")
def rabbit_url() -> str:
    if not _port_open(5672):
        for command in (["rabbitmq-server", "-detached"], ["service", "rabbitmq-server", "start"]):
            if shutil.which(command[0]):
                subprocess.run(command, check=False, timeout=60)
                break
        if not _wait_port(5672, 60):
            pytest.fail("RabbitMQ is not running on 127.0.0.1:5672 and could not be started")
    return "amqp://guest:guest@127.0.0.1:5672//"


@pytest.fixture(scope="session")
def rabbit_management(rabbit_url: str) -> str:
    """Enables the management plugin when it is off (it ships with RabbitMQ)."""
    if not _port_open(15672) and shutil.which("rabbitmq-plugins"):
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
