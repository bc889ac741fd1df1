"""Start and stop a real Celery worker process for a test (bounded waits, always stopped)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


@contextmanager
def celery_worker(*, broker: str, prefix: str, control: str, queues: list[str], concurrency: int) -> Iterator[None]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SIGTEST_BROKER": broker,
        "SIGTEST_PREFIX": prefix,
        "SIGTEST_CONTROL": control,
    }
    command = [
        sys.executable, "-m", "celery", "-A", "tests.integration.signals.celery_app", "worker",
        "-Q", ",".join(queues), "-c", str(concurrency), "-P", "threads", "--prefetch-multiplier", "1",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning",
        "-n", f"{prefix or 'sigtest'}@%h",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        output = process.stdout.read().decode(errors="replace") if process.stdout else ""
        if process.returncode not in (0, -signal.SIGTERM) and output:
            print(output[-4000:])
