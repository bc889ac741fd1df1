"""The daemon as a process running a spot tier on the Spheron adapter against a local server that speaks
Spheron's API: a preempted instance is replaced in the same tick; when spot capacity is gone the tier
falls back to on-demand, and hands back to spot when it returns. Instance addresses point at a local vLLM
stand-in, so readiness and drain checks run for real — on loopback only."""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from scalectl.clocks import SystemClock
from scalectl.vllm_standin.server import run_in_thread
from tests.e2e import helpers
from tests.e2e.helpers import free_port, start_daemon
from tests.fakes.spheron_server import API_KEY, SSH_KEY_ID, TEAM_ID, FakeSpheron, booting_spheron

pytestmark = pytest.mark.e2e
SPOT_OFFER = "sai-h100-sxm5-spot"
LIVE = ("pending", "provisioning", "bootstrapping", "ready")
SECRET = "e2e-agent-secret-0123456789abcdef"


def signed(body: bytes) -> dict[str, str]:
    """docs/webhooks.md: HMAC-SHA256 over "<timestamp>.<raw body>", hex, with a sha256= prefix."""
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Scalectl-Timestamp": ts, "X-Scalectl-Signature": f"sha256={digest}"}


@pytest.fixture
def cloud() -> Iterator[tuple[FakeSpheron, str, int]]:
    standins = run_in_thread()
    port = urlparse(standins.url).port
    assert port is not None
    try:
        with booting_spheron(SystemClock(), minimum_runtime_minutes=0, ip_address="127.0.0.1") as (fake, server):
            yield fake, server.url, port
    finally:
        standins.stop()


def tiers_yaml(url: str, port: int) -> str:
    return f"""
tiers:
  batch:
    capacity: spot
    fallback: on-demand
    gpu: H100-SXM5-80GB
    providers: [spheron]
    min: 3
    max: 3
    drain_timeout: 5s
    policy: {{kind: min-floor, floor: 3}}
providers:
  spheron:
    type: spheron
    base_url: {url}
    options: {{ssh_key_id: {SSH_KEY_ID}, team_id: {TEAM_ID}, server_port: {port}}}
"""


def rows(data: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(data / "scalectl.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM instances ORDER BY created_at")]


def wait_for(what: str, check: Callable[[], bool], seconds: float = 90) -> None:
    helpers.wait_for(what, check, seconds, ignoring=(sqlite3.Error,))  # the daemon writes as we read


def live(data: Path, capacity: str | None = None) -> list[dict[str, Any]]:
    return [r for r in rows(data) if r["state"] in LIVE and (capacity is None or r["capacity"] == capacity)]


def test_preemptions_are_replaced_at_once_with_fallback_and_hand_back(
    tmp_path: Path, cloud: tuple[FakeSpheron, str, int]
) -> None:
    fake, url, port = cloud
    config = tmp_path / "tiers.yaml"
    config.write_text(tiers_yaml(url, port))
    http_port = free_port()
    daemon = start_daemon(
        tmp_path,
        "--config",
        str(config),
        "--port",
        str(http_port),
        SCALECTL_SPHERON_API_KEY=API_KEY,
        SCALECTL_WEBHOOK_SECRET=SECRET,
        SCALECTL_TICK_INTERVAL="1",
        SCALECTL_OFFERS_TTL="1",
        SCALECTL_OFFER_UNAVAILABLE_FOR="5",
    )
    try:
        wait_for("3 spot instances ready", lambda: sum(r["state"] == "ready" for r in live(tmp_path, "spot")) == 3)

        # 0. An interruption notice (the on-instance agent's webhook): replaced in the tick that sees it,
        # while the warned instance still drains.
        warned = live(tmp_path)[0]
        notice = {"provider": "spheron", "key": warned["key"], "instance_id": warned["provider_id"]}
        notice["action"] = "terminate"
        body = json.dumps(notice).encode()
        url = f"http://127.0.0.1:{http_port}/v1/webhooks/interruption"
        answer = httpx.post(url, content=body, headers=signed(body), timeout=10)
        assert answer.status_code == 202, answer.text

        def warned_and_replaced() -> bool:
            row = next(r for r in rows(tmp_path) if r["key"] == warned["key"])
            return row["drain_started_at"] is not None and any(
                r["created_at"] == row["drain_started_at"] for r in rows(tmp_path) if r["key"] != warned["key"]
            )

        wait_for("the warned instance replaced in the same tick", warned_and_replaced)
        wait_for("the warned instance retired", lambda: warned["key"] not in {r["key"] for r in live(tmp_path)})
        wait_for(
            "3 spot instances ready again", lambda: sum(r["state"] == "ready" for r in live(tmp_path, "spot")) == 3
        )

        # 1. A preemption (Spheron shows it as terminated-provider): replaced in the same tick.
        victim = live(tmp_path)[0]
        fake.preempt(victim["provider_id"])

        def closed_and_replaced() -> bool:  # both land in one tick, committed a moment apart
            ended = [r for r in rows(tmp_path) if r["key"] == victim["key"] and r["state"] == "terminated"]
            return bool(ended) and any(
                r["created_at"] >= ended[0]["ended_at"] for r in rows(tmp_path) if r["key"] != victim["key"]
            )

        wait_for("the preempted instance closed and replaced", closed_and_replaced)
        ended = next(r for r in rows(tmp_path) if r["key"] == victim["key"])
        assert ended["interrupted"] and ended["cost"] > 0
        replacement = [r for r in rows(tmp_path) if r["created_at"] >= ended["ended_at"] and r["key"] != victim["key"]]
        assert replacement and min(r["created_at"] for r in replacement) == ended["ended_at"]  # the same tick
        assert len(live(tmp_path)) == 3

        # 2. Spot capacity is gone and another instance is preempted: on-demand takes over.
        fake.set_available(SPOT_OFFER, False)
        time.sleep(2.5)  # the offers cache (1 s TTL) sees it
        victim2 = next(r for r in live(tmp_path, "spot") if r["state"] == "ready")
        fake.preempt(victim2["provider_id"])

        def at_provider() -> int:  # the store records an instance before it asks the provider for it
            return len([d for d in fake.live() if d["name"].startswith("sc-")])

        wait_for("an on-demand fallback instance", lambda: len(live(tmp_path, "on-demand")) == 1)
        assert len(live(tmp_path)) == 3
        wait_for("the fallback created at the provider", lambda: at_provider() == 3)

        # 3. Spot comes back (and is cheaper): the fallback is handed back to spot, never above 3 + 1 billed.
        peak, sampling = [0], threading.Event()

        def sample() -> None:
            while not sampling.wait(0.05):
                peak[0] = max(peak[0], at_provider())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        fake.set_available(SPOT_OFFER, True)
        try:
            wait_for("back on spot only", lambda: len(live(tmp_path, "on-demand")) == 0 and len(live(tmp_path)) == 3)
            wait_for("the provider agrees", lambda: at_provider() == 3)
        finally:
            sampling.set()
            sampler.join(timeout=5)
        assert 3 <= peak[0] <= 4
        fallback = next(r for r in rows(tmp_path) if r["capacity"] == "on-demand")
        assert fallback["state"] == "terminated" and not fallback["interrupted"]
        assert max(len(fake.live()), 0) <= 4  # never more than max + one surge at the provider
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        finally:
            if daemon.poll() is None:
                daemon.kill()
    # Every machine the provider still runs is one the store tracks as live: nothing untracked.
    tracked = {r["provider_id"] for r in live(tmp_path)}
    assert {d["id"] for d in fake.live() if d["name"].startswith("sc-")} <= tracked
