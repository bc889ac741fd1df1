"""A Celery app for the broker tests. Configured from the environment so the worker process (started by a
test) and the test's producer agree: broker URL, Redis key prefix, and where the release flag lives."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

BROKER = os.environ.get("SIGTEST_BROKER", "redis://127.0.0.1:6379/11")
PREFIX = os.environ.get("SIGTEST_PREFIX", "")
CONTROL = os.environ.get("SIGTEST_CONTROL", "redis://127.0.0.1:6379/11")


def make_app(broker: str, prefix: str) -> Celery:
    """The app as configured here, without its task: a test's producer sends by name (``sigtest.hold``). Made
    afresh per test; reloading this module instead registered the task again, and Celery warns of that."""
    app = Celery("sigtest", broker=broker)
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_queue_max_priority=10,  # RabbitMQ: x-max-priority on declared queues
        broker_transport_options={"global_keyprefix": prefix, "priority_steps": [0, 3, 6, 9], "visibility_timeout": 600}
        if broker.startswith("redis")
        else {},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        task_ignore_result=True,
    )
    return app


app = make_app(BROKER, PREFIX)  # the worker's (`celery -A` this module), from the environment the test set


@app.task(name="sigtest.hold")
def hold(flag: str, limit_s: float = 60.0) -> None:
    """Stay in flight until the test sets ``flag`` in the control Redis (bounded)."""
    client = redis.Redis.from_url(CONTROL)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not client.exists(flag):
        time.sleep(0.05)
