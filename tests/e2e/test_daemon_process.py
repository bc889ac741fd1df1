"""The daemon as a process: the embedded demo scales tiers up and down; SIGKILL mid-creation loses and
duplicates nothing; SIGTERM stops cleanly."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import daemon_log, free_port, json_of, scalectl, start_daemon, wait_for

pytestmark = pytest.mark.e2e


def _series(decisions: list[dict], tier: str) -> list[tuple[float, int]]:
    """(t, desired) each time the desired count changed (the minute samples in between dropped)."""
    changes: list[tuple[float, int]] = []
    for d in decisions:
        if d["tier"] != tier:
            continue
        desired = int(d["what"].split(" → ")[1].split(":")[0])
        if not changes or changes[-1][1] != desired:
            changes.append((d["t"], desired))
    return changes


def test_embedded_daemon_scales_up_and_down_without_flapping(tmp_path: Path) -> None:
    run = scalectl(tmp_path, "daemon", "--speed", "300", "--run-for", "70m", "--port", "0", timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "bundled example tiers" in run.stderr
    events = json_of(scalectl(tmp_path, "events", "--limit", "100000", "-o", "json"))
    decisions = [e for e in events if e["kind"] == "decision"]

    research = [n for _, n in _series(decisions, "research")]
    first_up = next(i for i, n in enumerate(research) if n > 0)
    assert research[0] == 0 and max(research) >= 5
    assert 0 in research[first_up:], "research never went back to zero"

    orch = _series(decisions, "orchestrator")
    counts = [n for _, n in orch]
    peak_at = counts.index(max(counts))
    assert max(counts) > 2
    assert 2 in counts[peak_at:], "orchestrator never came back to its floor"
    assert min(counts[1:]) >= 2  # never below the floor once it was reached
    # No flapping (target mode's stabilisation): a scale-in only once the last scale-out's need has left the
    # 5-minute window, and a scale-out never right after a scale-in.
    last_out = orch[0][0]
    for (_t0, n0), (t1, n1), (t2, n2) in zip(orch, orch[1:], orch[2:], strict=False):
        if n1 > n0:
            last_out = t1
        if n2 < n1:
            assert t2 - last_out >= 300 - 1, f"scale-in {n1}→{n2} only {t2 - last_out:.0f}s after a scale-out"
        if n1 < n0 and n2 > n1:
            assert t2 - t1 >= 60 - 1, f"scale-out {n1}→{n2} {t2 - t1:.0f}s after a scale-in"
    stopped = scalectl(tmp_path, "status", "-o", "json")
    assert stopped.returncode == 4, stopped.stderr  # the daemon has stopped: the figures are its last
    document = json.loads(stopped.stdout)
    status = {r["tier"]: r for r in document["tiers"]}
    assert set(status) == {"orchestrator", "research", "support-daytime"}
    assert document["daemon"]["running"] is False and document["daemon"]["last_seen"] is not None

    # The rows carry the 300× world's time: the CLI reads them in that world (no negative ages, and
    # --since filters), although that world ended ~70 min ahead of the wall clock.
    recent = json_of(scalectl(tmp_path, "events", "--since", "10m", "--limit", "100000", "-o", "json"))
    newest = max(e["t"] for e in events)
    assert recent and len(recent) < len(events)
    assert all(e["t"] >= newest - 600 - 60 for e in recent)
    described = json_of(scalectl(tmp_path, "describe", "tier", "orchestrator", "-o", "json"))
    ages = [d["age"] for d in described["decisions"]] + [i["age"] for i in described["instances"]]
    assert ages and not any(a.startswith("-") for a in ages), ages


BURST = """
tiers:
  burst:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [slowsim]
    min: 8
    max: 8
    policy: {kind: min-floor, floor: 8}
providers:
  slowsim:
    type: simulated
    options: {create_delay: 30, provision_delay_min: 5, provision_delay_max: 5}
"""


def _db_rows(data_dir: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(data_dir / "scalectl.db") as db:
        return list(db.execute("SELECT key, state, provider_id FROM instances"))


def _cloud(data_dir: Path) -> list[dict]:
    path = data_dir / "simulated-cloud-slowsim.json"
    return json.loads(path.read_text())["instances"] if path.exists() else []


def test_sigkill_while_creating_then_restart_has_no_duplicate_and_no_untracked_instance(tmp_path: Path) -> None:
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text(BURST)
    daemon = start_daemon(tmp_path, "--config", str(tiers), "--port", "0")
    try:

        def creating() -> bool:  # the creates have reached the cloud, their answers have not
            if len(_cloud(tmp_path)) != 8 or not (tmp_path / "scalectl.db").exists():
                return False
            rows = _db_rows(tmp_path)
            return len(rows) == 8 and all(pid is None for _, _, pid in rows)

        wait_for("the daemon to get to creating instances", creating, ignoring=(sqlite3.Error,))
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(timeout=10)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    # The crash window: rows with no provider id, machines in the cloud that no row points at yet.
    assert all(pid is None for _, state, pid in _db_rows(tmp_path) if state == "pending")
    before = {i["key"] for i in _cloud(tmp_path)}
    assert len(before) == 8

    rerun = scalectl(tmp_path, "daemon", "--ticks", "3", "--port", "0", timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = _db_rows(tmp_path)
    cloud = _cloud(tmp_path)
    live_rows = {key: pid for key, state, pid in rows if state not in ("terminated", "failed")}
    assert len(cloud) == 8, "duplicate instances were created"
    assert {i["key"] for i in cloud} == before  # the same machines, adopted
    assert len(live_rows) == 8
    assert {i["key"]: i["provider_id"] for i in cloud} == live_rows  # every machine tracked by exactly its row


def test_sigterm_stops_cleanly_after_the_tick_in_progress(tmp_path: Path) -> None:
    port = free_port()
    daemon = start_daemon(tmp_path, "--port", str(port), "--speed", "10")
    try:

        def ready() -> bool:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200

        wait_for("/readyz to answer 200", ready, ignoring=(httpx.HTTPError,))
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json() == {"status": "ok"}
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        assert "scalectl_tier_desired_instances" in metrics and 'tier="orchestrator"' in metrics
        status = httpx.get(f"http://127.0.0.1:{port}/v1/status", timeout=2).json()
        assert {t["tier"] for t in status["tiers"]} == {"orchestrator", "research", "support-daytime"}
        # `scalectl status -o json` prints the same document (read a moment later, so counts may move on).
        printed = json_of(scalectl(tmp_path, "status", "-o", "json"))
        assert set(printed) == set(status) == {"tiers", "leader", "replicas", "daemon"}
        assert printed["daemon"]["running"] is status["daemon"]["running"] is True
        assert [sorted(row) for row in printed["tiers"]] == [sorted(row) for row in status["tiers"]]
        assert {k: printed["leader"][k] for k in ("host", "pid", "epoch", "since")} == {
            k: status["leader"][k] for k in ("host", "pid", "epoch", "since")
        }
        assert [sorted(r) for r in printed["replicas"]] == [sorted(r) for r in status["replicas"]]
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=30)
        err = daemon_log(tmp_path).read_text()
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert code == 0
    assert "stopped cleanly" in err


def test_json_logs_from_the_environment_carry_the_demo_time(tmp_path: Path) -> None:
    run = scalectl(
        tmp_path, "daemon", "--speed", "60", "--ticks", "2", "--port", "0", SCALECTL_LOG_FORMAT="json", timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    records = [json.loads(line) for line in run.stderr.splitlines() if line.strip()]
    assert records and all(r["time"] and r["level"] for r in records)
    # world_time is null only on the lines before the demo clock is set (its own announcement)
    unset = [r["message"] for r in records if not r["world_time"]]
    assert all(m.startswith("demo clock starts at") for m in unset) and len(unset) < len(records)
    assert any("daemon started" in r["message"] for r in records)
    bad = scalectl(tmp_path, "daemon", "--ticks", "1", SCALECTL_LOG_LEVEL="loud")
    assert bad.returncode == 2 and "SCALECTL_LOG_LEVEL='loud'" in bad.stderr and "Traceback" not in bad.stderr


def test_the_synthetic_load_survives_apply_and_restart(tmp_path: Path) -> None:
    example = str(Path(__file__).resolve().parents[2] / "examples" / "tiers.yaml")
    assert scalectl(tmp_path, "apply", "-f", example).returncode == 0  # applied by hand, not the bundle
    for _ in range(2):  # and again after a restart
        run = scalectl(tmp_path, "daemon", "--speed", "60", "--ticks", "30", "--port", "0", timeout=180)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "read the demo's synthetic load" in run.stderr
    described = json_of(scalectl(tmp_path, "describe", "tier", "orchestrator", "-o", "json"))
    assert described["signals"]["queue_depth"] is not None and "signals" not in described["signal_errors"]
    assert scalectl(tmp_path, "diff", "-f", example).returncode == 0  # the README's step: no change
