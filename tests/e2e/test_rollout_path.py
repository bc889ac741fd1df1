"""A rolling replacement end to end: the daemon as a process with the local provider (real stand-in servers)
behind a private, real nginx, under a steady stream of chat completions. The tier's server changes (a new
max_model_len reaches the vLLM arguments); every instance is replaced, one surge at a time, with no failed
request and the ready count never below the policy's need."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.helpers import free_port, json_of, scalectl
from tests.e2e.local_fleet import local_fleet, tiers_yaml
from tests.e2e.test_serving_path import Load, _answers
from tests.private_nginx import NGINX, PrivateNginx, private_nginx

pytestmark = pytest.mark.e2e


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[PrivateNginx]:
    with private_nginx(tmp_path / "nginx", worker_connections=512, start_polls=200) as server:
        yield server


def test_a_changed_server_rolls_through_the_fleet_without_a_failed_request(tmp_path: Path, nginx: PrivateNginx) -> None:
    lb_port = free_port()
    lb = f"http://127.0.0.1:{lb_port}/v1/chat/completions"
    load = Load(lb)
    routing = {
        "SCALECTL_ROUTING": "nginx",
        "SCALECTL_ROUTING_NGINX_BIN": NGINX,
        "SCALECTL_ROUTING_CONF_DIR": str(nginx.conf_d),
        "SCALECTL_ROUTING_MAIN_CONF": str(nginx.main),
        "SCALECTL_ROUTING_PREFIX": str(nginx.prefix),
        "SCALECTL_ROUTING_LISTEN": json.dumps({"chat": f"127.0.0.1:{lb_port}"}),
    }
    with local_fleet(tmp_path, 2, **routing) as fleet:
        try:
            fleet.wait("two ready instances", lambda: fleet.counts() == (2, 0, 0))
            fleet.wait("nginx to route to them", lambda: _answers(lb))
            first = {i["key"] for i in fleet.instances()}
            load.start()
            fleet.wait("requests flowing", lambda: load.count() >= 20, seconds=30)

            changed = tmp_path / "tiers-v2.yaml"
            text = tiers_yaml(fleet.target, fleet.state_dir)
            changed.write_text(text.replace("max_model_len: 2048", "max_model_len: 1024"))
            applied = scalectl(fleet.data_dir, "apply", "-f", str(changed))
            assert applied.returncode == 0, applied.stderr

            lowest = 2
            deadline = time.monotonic() + 150
            done = False
            while time.monotonic() < deadline and not done:  # bounded: the rollout, sampled every 0.2 s
                ready = fleet.counts()[0]
                if ready >= 0:
                    lowest = min(lowest, ready)
                rollout = json_of(scalectl(fleet.data_dir, "rollout", "status", "chat", "-o", "json"))
                done = rollout["state"] == "complete" and rollout["current"] == 2
                time.sleep(0.2)
            assert done, f"rollout not complete: {rollout}\n{fleet.log_tail()}"
            fleet.wait("two ready instances on the new server", lambda: fleet.counts() == (2, 0, 0))
            now_running = {i["key"] for i in fleet.instances()}
            before = load.count()
            fleet.wait("more requests after the rollout", lambda: load.count() >= before + 40, seconds=30)
        finally:
            load.stop()

        assert now_running.isdisjoint(first), (first, now_running)  # every instance replaced
        assert lowest >= 2, f"ready dropped to {lowest} during the rollout"
        assert load.failed == [], f"{len(load.failed)} failed requests, e.g. {load.failed[:5]}"
        fleet.steer(0)
        fleet.wait("no instances", lambda: fleet.counts() == (0, 0, 0))
        assert fleet.stop() == 0, fleet.log_tail()
        assert fleet.leftovers() == [], "stand-in processes still running"

    events = json_of(scalectl(fleet.data_dir, "events", "--limit", "1000", "-o", "json"))
    replaced = [e for e in events if e["kind"] == "draining" and "rollout: replaced by" in e.get("what", "")]
    assert len(replaced) == 2, [e["what"] for e in events if e.get("tier") == "chat"][-20:]


def test_a_server_that_cannot_start_stops_the_rollout_after_the_first_failed_instance(tmp_path: Path) -> None:
    """A changed server the stand-in refuses to start (a context longer than the model supports: vLLM
    exits at start-up the same way): one surge instance is tried, it fails, the rollout stops and says so,
    and the two old instances keep serving. No crash loop across the fleet."""
    with local_fleet(tmp_path, 2) as fleet:
        fleet.wait("two ready instances", lambda: fleet.counts() == (2, 0, 0))
        first = {i["key"] for i in fleet.instances()}
        broken = tmp_path / "tiers-broken.yaml"
        text = tiers_yaml(fleet.target, fleet.state_dir).replace(
            "serving: {max_model_len: 2048, target_concurrency: 16}",
            'serving: {max_model_len: 2048, target_concurrency: 16, extra_args: ["--max-model-len", "1000000"]}',
        )
        broken.write_text(text.replace("bootstrap_timeout: 60s", "bootstrap_timeout: 20s"))
        applied = scalectl(fleet.data_dir, "apply", "-f", str(broken))
        assert applied.returncode == 0, applied.stderr

        def stopped() -> bool:
            status = json_of(scalectl(fleet.data_dir, "rollout", "status", "chat", "-o", "json"))
            return str(status["state"]).startswith("stopped")

        fleet.wait("the rollout to stop", stopped, seconds=120)
        time.sleep(5)  # a few more ticks: nothing else may be launched on the broken server
        status = json_of(scalectl(fleet.data_dir, "rollout", "status", "chat", "-o", "json"))
        assert status["state"].startswith("stopped") and status["drifted"] == 2, status
        assert fleet.counts()[0] == 2  # the old instances still serve
        assert {i["key"] for i in fleet.instances()} == first  # the failed one is gone, the old ones stay
        events = json_of(scalectl(fleet.data_dir, "events", "--limit", "1000", "-o", "json"))
        launched = [e for e in events if e["kind"] == "launched" and e.get("tier") == "chat"]
        assert len(launched) == 3, [e["what"] for e in launched]  # two at the start, one surge, no more
        assert any(e["kind"] == "rollout-stopped" for e in events), [e["kind"] for e in events][-20:]
        fleet.steer(0)
        fleet.wait("no instances", lambda: fleet.counts() == (0, 0, 0))
        assert fleet.stop() == 0, fleet.log_tail()
        assert fleet.leftovers() == [], "stand-in processes still running"
