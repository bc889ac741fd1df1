"""``scalectl signals`` against stand-ins and Redis."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import redis
import typer
from typer.testing import CliRunner

from scalectl.cli import signals_cmd
from scalectl.vllm_standin import StandinConfig, run_in_thread

# The command as scalectl registers it, in a group of its own (other command groups may not exist here).
app = typer.Typer()


@app.callback()
def _root() -> None:
    pass


signals_cmd.register(app)

pytestmark = pytest.mark.integration


def test_signals_json_reads_queue_and_metrics(tmp_path: Path, redis_url: str, unique: str) -> None:
    queue = f"{unique}-q"
    raw = redis.Redis.from_url(redis_url)
    raw.lpush(queue, "a", "b", "c")
    raw.lpush(f"{queue}\x06\x169", "d")
    try:
        with run_in_thread(StandinConfig(model="m", speed=50)) as server:
            for _ in range(3):
                httpx.post(
                    server.url + "/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "hi"}]},
                    timeout=30,
                )
            tiers = tmp_path / "tiers.yaml"
            tiers.write_text(
                f"""
tiers:
  research:
    capacity: spot
    gpu: A100-80GB-PCIe
    providers: [simulated]
    min: 0
    max: 5
    policy: {{kind: scale-to-zero}}
    signals:
      queue: {{broker_url: "{redis_url}", queues: ["{queue}"]}}
      endpoints: ["{server.url}", "127.0.0.1:1"]
"""
            )
            result = CliRunner().invoke(app, ["signals", "-f", str(tiers), "--window", "0.3s", "-o", "json"])
    finally:
        raw.delete(queue, f"{queue}\x06\x169")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["tier"] == "research"
    assert row["queue_depth"] == 4 and row["in_flight"] == 0
    assert row["requests_running"] == 0 and row["kv_cache_usage"] == 0
    assert row["ttft_p95_s"] is None  # nothing finished during the window: unknown, not 0
    assert list(row["errors"]) == ["vllm http://127.0.0.1:1"]


def test_signals_bad_file_is_a_usage_error(tmp_path: Path) -> None:
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text("tiers: {a: {capacity: spot}}\n")
    result = CliRunner().invoke(app, ["signals", "-f", str(tiers)])
    assert result.exit_code == 2
    bad_window = CliRunner().invoke(app, ["signals", "-f", "examples/tiers.yaml", "--window", "soon"])
    assert bad_window.exit_code == 2
