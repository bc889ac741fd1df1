"""Scale-from-zero over HTTP, end to end: the daemon as a process on the local provider (real stand-in
server processes), a private real nginx, and the tier's own policy (min-floor, floor 0).

A tier at zero receives 50 concurrent streaming chat completions through nginx. The activator holds them,
the policy starts an instance in the tick that sees them, and every request is answered 200, streamed,
once that instance is ready; then nginx routes straight to the instance and the activator is out of the
path. Over the hold bound, nginx answers 503 with Retry-After from the activator.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import free_port, json_of, scalectl
from tests.e2e.local_fleet import MODEL, Fleet, local_fleet
from tests.private_nginx import NGINX, PrivateNginx, private_nginx

pytestmark = pytest.mark.e2e

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "wake up"}], "max_tokens": 16, "stream": True}
POLICY = "{kind: min-floor, floor: 0, capacity: 100, idle_after: 3s}"


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[PrivateNginx]:
    with private_nginx(tmp_path / "nginx", worker_connections=512, start_polls=200) as server:
        yield server


def routing_env(nginx: PrivateNginx, port: int) -> dict[str, str]:
    return {
        "SCALECTL_ROUTING": "nginx",
        "SCALECTL_ROUTING_NGINX_BIN": NGINX,
        "SCALECTL_ROUTING_CONF_DIR": str(nginx.conf_d),
        "SCALECTL_ROUTING_MAIN_CONF": str(nginx.main),
        "SCALECTL_ROUTING_PREFIX": str(nginx.prefix),
        "SCALECTL_ROUTING_LISTEN": json.dumps({"chat": f"127.0.0.1:{port}"}),
    }


@dataclass
class Answer:
    status: int
    chunks: int  # SSE data lines before [DONE]
    done: bool
    upstream: str  # nginx's X-Scalectl-Upstream: who answered
    activator: str | None  # the activator's note (instance; held=…s), None when it was not in the path
    retry_after: str | None
    seconds: float
    error: str | None = None


def stream_one(url: str, together: threading.Barrier | None = None) -> Answer:
    """One streamed request; with ``together``, sent once every other thread's client is built too (a
    loaded machine starts threads slowly, and a late one would find the tier already awake)."""
    with httpx.Client(timeout=120) as client:
        if together is not None:
            together.wait(60)
        started = time.monotonic()
        try:
            with client.stream("POST", url, json=BODY) as r:
                chunks, done = 0, False
                for line in r.iter_lines():
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data: "):
                        chunks += 1
                headers = r.headers
                return Answer(
                    r.status_code,
                    chunks,
                    done,
                    headers.get("x-scalectl-upstream", ""),
                    headers.get("x-scalectl-activator"),
                    headers.get("retry-after"),
                    time.monotonic() - started,
                )
        except httpx.HTTPError as exc:
            elapsed = time.monotonic() - started
            return Answer(0, 0, False, "", None, None, elapsed, f"{type(exc).__name__}: {exc}")


def concurrently(url: str, n: int) -> list[Answer]:
    answers: list[Answer] = []
    lock = threading.Lock()

    together = threading.Barrier(n)

    def work() -> None:
        answer = stream_one(url, together)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)  # bounded: each request has its own 120 s timeout
    return answers


def held_now(fleet: Fleet) -> float:
    text = httpx.get(f"{fleet.url}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith('scalectl_activator_requests_held{tier="chat"}'):
            return float(line.split()[-1])
    return -1.0


def test_a_tier_at_zero_wakes_on_50_streaming_requests_and_then_leaves_the_activator(
    tmp_path: Path, nginx: PrivateNginx
) -> None:
    lb_port = free_port()
    url = f"http://127.0.0.1:{lb_port}/v1/chat/completions"
    # A 10 s reading window: the arrival rate falls to 0 soon after the burst, so the tier goes idle.
    extra = "\n    activator: {max_held: 64, max_wait: 90s}\n    signals: {metrics: {window: 10s}}"
    with local_fleet(tmp_path, 0, policy=POLICY, max_instances=2, extra=extra, **routing_env(nginx, lb_port)) as fleet:
        fleet.wait("the daemon at zero, routing to the activator", lambda: fleet.counts() == (0, 0, 0))
        fleet.wait("nginx configured", lambda: (nginx.conf_d / "scalectl-chat.conf").exists())
        assert "/activate/chat/" in (nginx.conf_d / "scalectl-chat.conf").read_text()
        described = json_of(scalectl(fleet.data_dir, "describe", "tier", "chat", "-o", "json"))
        assert described["signal_sources"]["requests_waiting"] == "activator"  # known 0 at zero, not unknown
        assert described["signals"]["requests_waiting"] == 0
        assert held_now(fleet) == 0

        first_request = time.monotonic()
        answers = concurrently(url, 50)
        ready_seen = time.monotonic()

        failed = [a for a in answers if a.status != 200 or not a.done]
        assert len(answers) == 50
        assert failed == [], f"{len(failed)} failed, e.g. {failed[:3]}\n{fleet.log_tail()}"
        assert all(a.chunks >= 2 for a in answers), "responses were not streamed token by token"
        assert all(a.activator is not None for a in answers), "every request was held by the activator"
        held = sorted(float(a.activator.split("held=")[1].rstrip("s")) for a in answers if a.activator)
        assert held[-1] > 0  # they waited for the instance to start
        print(
            f"\n50 streaming requests at zero: held p50 {held[25]:.2f}s max {held[-1]:.2f}s; "
            f"all answered within {ready_seen - first_request:.2f}s of the first"
        )

        # Warm: nginx sends to the instance itself; the activator is no longer in the path.
        fleet.wait(
            "the route to the instance", lambda: "/activate/" not in (nginx.conf_d / "scalectl-chat.conf").read_text()
        )
        warm = [stream_one(url) for _ in range(5)]
        assert all(a.status == 200 and a.done for a in warm), warm
        assert all(a.activator is None for a in warm), "a warm request went through the activator"
        daemon_address = f"127.0.0.1:{fleet.http_port}"
        assert all(a.upstream and a.upstream != daemon_address for a in warm), [a.upstream for a in warm]
        assert held_now(fleet) == 0

        # Idle again: back to zero, and the route goes back to the activator.
        fleet.wait("back to zero", lambda: fleet.counts() == (0, 0, 0), seconds=60)
        fleet.wait(
            "the route back to the activator", lambda: "/activate/" in (nginx.conf_d / "scalectl-chat.conf").read_text()
        )
        assert fleet.stop() == 0, fleet.log_tail()
        assert fleet.leftovers() == [], "stand-in processes still running"
        assert "Traceback" not in fleet.log_tail(), fleet.log_tail()


def test_over_the_hold_bound_nginx_answers_503_with_retry_after(tmp_path: Path, nginx: PrivateNginx) -> None:
    lb_port = free_port()
    url = f"http://127.0.0.1:{lb_port}/v1/chat/completions"
    extra = "\n    activator: {max_held: 2, max_wait: 3s}"
    # max 0: the tier cannot start, so held requests stay held until max_wait.
    with local_fleet(tmp_path, 0, policy=POLICY, max_instances=0, extra=extra, **routing_env(nginx, lb_port)) as fleet:
        fleet.wait("nginx configured", lambda: (nginx.conf_d / "scalectl-chat.conf").exists())
        fleet.wait(
            "the activator route", lambda: "/activate/chat/" in (nginx.conf_d / "scalectl-chat.conf").read_text()
        )
        answers = concurrently(url, 5)
        assert [a.status for a in answers] == [503] * 5, answers
        assert all(a.retry_after and int(a.retry_after) > 0 for a in answers), answers
        metrics = httpx.get(f"{fleet.url}/metrics", timeout=5).text
        full = _counter(metrics, "full")
        timed_out = _counter(metrics, "timed_out")
        assert (full, timed_out) == (3, 2), (full, timed_out)  # two were held until max_wait, three refused at once
        assert held_now(fleet) == 0
        assert fleet.stop() == 0, fleet.log_tail()


def _counter(metrics: str, outcome: str) -> float:
    prefix = f'scalectl_activator_requests_total{{outcome="{outcome}",tier="chat"}}'
    return next(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(prefix))
