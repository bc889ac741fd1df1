"""`scalectl simulate` as a process: JSON report and plot, determinism across processes, bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.helpers import scalectl

TIERS = """
tiers:
  web:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 1
    max: 4
    policy: {kind: min-floor, floor: 1, ttft_max: 400ms}
  jobs:
    capacity: spot
    fallback: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 0
    max: 6
    policy: {kind: scale-to-zero, queue_per_instance: 8}
"""

WORKLOAD = """
seed: 3
duration: 30m
tiers:
  web: {kind: poisson, rate: 20, ttft_target: 500ms}
  jobs:
    kind: batch
    bursts: [{at: 5m, tasks: 40, over: 1m}]
    task_time: {mean: 45s, cv: 0.3}
cloud: {spot_interruptions_per_hour: 1, notice: 30s}
"""


def _files(tmp_path: Path, tiers: str = TIERS, workload: str = WORKLOAD) -> tuple[Path, Path]:
    (tmp_path / "tiers.yaml").write_text(tiers)
    (tmp_path / "day.yaml").write_text(workload)
    return tmp_path / "tiers.yaml", tmp_path / "day.yaml"


def test_json_report_plot_and_the_same_answer_in_another_process(tmp_path: Path) -> None:
    tiers, workload = _files(tmp_path)
    plot = tmp_path / "day.png"
    args = ("simulate", "-f", str(tiers), "--workload", str(workload), "-o", "json")
    first = scalectl(tmp_path / "a", *args, "--plot", str(plot), PYTHONHASHSEED="1")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)  # nothing but the report on stdout
    assert set(report["tiers"]) == {"web", "jobs"}
    web = report["tiers"]["web"]
    assert web["requests"] > 30_000 and 0.9 < web["slo_attainment"] <= 1.0
    assert set(web["baselines"]) == {"static", "reactive", "skyserve", "oracle", "clairvoyant"}
    assert web["cost_vs_oracle"] > 0 and web["cost_vs_clairvoyant"] > 0
    assert report["tiers"]["jobs"]["lost_tasks"] == 0
    assert abs(report["total"]["cost"] - report["controller"]["billed"]) < 1e-9
    assert report["controller"]["decisions"] > 0 and report["controller"]["events"]["launched"] >= 2
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = scalectl(tmp_path / "b", *args, PYTHONHASHSEED="2")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == report
    reseeded = scalectl(tmp_path / "c", *args, "--seed", "4", "--no-baselines")
    assert json.loads(reseeded.stdout)["tiers"]["web"]["requests"] != web["requests"]


def test_table_output(tmp_path: Path) -> None:
    tiers, workload = _files(tmp_path, workload=WORKLOAD.replace("duration: 30m", "duration: 5m"))
    result = scalectl(tmp_path, "simulate", "-f", str(tiers), "--workload", str(workload), "--no-baselines")
    assert result.returncode == 0, result.stderr
    assert "web" in result.stdout and "total" in result.stdout and "controller:" in result.stdout
    # no tables of dashes for baselines that did not run: one line says so
    assert "baselines: not run (--no-baselines)" in result.stdout and "Baselines: cost" not in result.stdout


def test_workload_tier_not_in_the_tiers_file_exits_2_naming_file_and_tier(tmp_path: Path) -> None:
    tiers, workload = _files(tmp_path, workload=WORKLOAD.replace("  web:", "  chat:"))
    result = scalectl(tmp_path, "simulate", "-f", str(tiers), "--workload", str(workload))
    assert result.returncode == 2
    assert f'{workload}: tier "chat": not in the tiers file' in " ".join(result.stderr.split())
    assert result.stdout == ""


def test_bad_workload_field_exits_2_naming_file_tier_and_field(tmp_path: Path) -> None:
    tiers, workload = _files(tmp_path, workload=WORKLOAD.replace("rate: 20", "rate: -1"))
    result = scalectl(tmp_path, "simulate", "-f", str(tiers), "--workload", str(workload))
    assert result.returncode == 2
    assert 'tier "web": rate: Input should be greater than 0' in " ".join(result.stderr.split())


def test_bad_tiers_file_exits_2(tmp_path: Path) -> None:
    tiers, workload = _files(tmp_path, tiers=TIERS.replace("max: 4", "max: four"))
    result = scalectl(tmp_path, "simulate", "-f", str(tiers), "--workload", str(workload))
    assert result.returncode == 2
    assert 'tier "web": max' in " ".join(result.stderr.split())


CUT_TIERS = """
tiers:
  jobs:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 0
    max: 40
    drain_timeout: 20m
    policy: {kind: scale-to-zero, max_wait: 6m}
"""

CUT_WORKLOAD = """
seed: 2
duration: 3h
tiers:
  jobs:
    kind: batch
    rate: 0.002
    bursts: [{at: 20m, tasks: 1000, over: 15m, every: 1h}]
    task_time: {mean: 9m, cv: 1.0}
    concurrency: 16
    wait_target: 6m
"""


def test_work_cut_by_a_drain_timeout_is_retried_in_the_same_order_whatever_the_hash_seed(tmp_path: Path) -> None:
    """Workers retired with tasks longer than their 30 s drain timeout are deleted with work on them: that work
    goes back to the queue, several workers at once. The order it goes back in must not follow Python's
    string hashing (it did: a set of instance ids), or the same run gives another answer in another process."""
    tiers, workload = _files(tmp_path, CUT_TIERS, CUT_WORKLOAD)
    args = ("simulate", "-f", str(tiers), "--workload", str(workload), "-o", "json", "--no-baselines")
    reports = []
    for seed in ("1", "2", "3", "4"):
        run = scalectl(tmp_path / seed, *args, PYTHONHASHSEED=seed)
        assert run.returncode == 0, run.stderr
        reports.append(json.loads(run.stdout))
    assert reports[0]["tiers"]["jobs"]["retries"] > 0  # work was cut and retried
    assert all(report == reports[0] for report in reports[1:])
