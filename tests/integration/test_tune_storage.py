"""`scalectl tune --storage`: two worker processes run trials into one Optuna study in PostgreSQL (a
scratch database, dropped after), both contribute, and a worker that resumes the study reports its best."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import optuna

from scalectl.simulator.tune_study import optuna_url
from tests.services import scratch_database
from tests.unit.simulator.test_tune import TIERS

WORKLOAD = """
seed: 3
duration: 5m
tiers:
  web: {kind: poisson, rate: 4, ttft_target: 500ms}
cloud: {provision_delay: 60s}
"""


def _tune(tiers: Path, workload: Path, url: str, study: str, trials: int) -> subprocess.Popen[str]:
    args = ["-f", str(tiers), "-w", str(workload), "-t", "web", "-n", str(trials), "--slo", "0.6"]
    return subprocess.Popen(
        [sys.executable, "-m", "scalectl.cli.main", "tune", *args, "--storage", url, "--study", study, "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1), err  # 1: no trial reached the SLO (still a report)
    return json.loads(out)


def test_two_workers_share_one_study_and_a_resumed_worker_reports_its_best(tmp_path: Path) -> None:
    tiers, workload = tmp_path / "tiers.yaml", tmp_path / "load.yaml"
    tiers.write_text(TIERS)
    workload.write_text(WORKLOAD)
    study = f"web-{uuid.uuid4().hex[:8]}"
    with scratch_database("sctune") as url:
        workers = [_tune(tiers, workload, url, study, 2) for _ in range(2)]
        for w in workers:
            _finish(w)
        stored = optuna.load_study(study_name=study, storage=optuna_url(url))
        done = [t for t in stored.get_trials(deepcopy=False) if t.state.is_finished()]
        assert len(done) == 4
        assert len({t.user_attrs["worker"] for t in done}) == 2  # both contributed
        resumed = _finish(_tune(tiers, workload, url, study, 1))  # load_if_exists: one more trial
        assert len(resumed["trials"]) == 5  # the whole study, not this worker's one trial
        assert {t["number"] for t in resumed["trials"]} == set(range(5))
        feasible = [t for t in resumed["trials"] if t["slo"] is not None and t["slo"] >= 0.6 and not t["stopped"]]
        if feasible:
            cheapest = min(feasible, key=lambda t: (t["cost"], t["number"]))
            assert resumed["best"]["number"] == cheapest["number"]
        else:
            assert resumed["best"] is None and resumed["closest"] is not None
        del stored
