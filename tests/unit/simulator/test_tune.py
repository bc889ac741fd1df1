"""scalectl tune: the search space comes from the policy models, the best is the cheapest trial meeting the
SLO, an unreachable SLO exits 1 with the closest settings, bad input exits 2 with one line."""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from scalectl.cli import tune_cmd
from scalectl.cli.main import app
from scalectl.policies.spec import ExternalPolicy, MinFloorPolicy, PredictivePolicy, ScaleToZeroPolicy
from scalectl.policies.tunable import tunable
from scalectl.simulator.controller_run import Checkpoint
from scalectl.simulator.fleet import Fleet
from scalectl.simulator.tune import (
    PACE,
    Bound,
    Pace,
    PaceRule,
    TrialJob,
    TuneResult,
    run_trial,
    search_space,
    tune,
    with_policy,
)
from scalectl.simulator.workloads.spec import Workload, parse_workload
from scalectl.tiers.config import FleetConfig, load_config

TIERS = """
tiers:
  web:
    capacity: on-demand
    gpu: L40S-48GB
    providers: [simulated]
    min: 1
    max: 6
    policy: {kind: min-floor, ttft_max: 500ms}
  mine:
    capacity: on-demand
    gpu: L40S-48GB
    providers: [simulated]
    min: 1
    max: 2
    policy: {kind: external, class: "examples.policies.keda_scaler:KedaScaledObject"}
"""

WORKLOAD = """
seed: 3
duration: 15m
tiers:
  web:
    kind: poisson
    rate: 12
    ttft_target: 500ms
    shape: [{kind: spike, at: 5m, duration: 6m, factor: 2.0}]
cloud: {provision_delay: 60s}
"""


def test_the_space_is_every_field_with_a_declared_range() -> None:
    names = {p.name for p in search_space(MinFloorPolicy)}
    assert names == {"stabilization", "idle_after", "scale_in_max_fraction", "scale_in_period"}
    assert "floor" not in names and "ttft_max" not in names  # the user's bounds and target are not searched
    predictive = {p.name for p in search_space(PredictivePolicy)}
    assert {"headroom", "lead_time", "reactive.stabilization", "reactive.scale_in_period"} <= predictive
    assert {p.name for p in search_space(ScaleToZeroPolicy)} == {"queue_per_instance", "activate_after", "idle_after"}
    assert search_space(ExternalPolicy) == []
    period = next(p for p in search_space(MinFloorPolicy) if p.name == "scale_in_period")
    assert not period.integer and (period.range.low, period.range.high) == (15, 300)

    class NewPolicy(BaseModel):  # a field added later is searched once it declares its range
        kind: Literal["new"]
        target_utilisation: float = Field(0.85, json_schema_extra=tunable(0.5, 0.95))

    [param] = search_space(NewPolicy)
    assert param.name == "target_utilisation" and not param.integer and param.range.high == 0.95


def test_the_best_is_the_cheapest_trial_that_meets_the_slo() -> None:
    config, text = load_config_text(TIERS)
    workload = parse_workload(WORKLOAD)
    result = tune(config, text, workload, "web", trials=3, slo_target=0.6, jobs=1)
    assert len(result.trials) == 3 and all(t.cost is not None for t in result.trials)
    costs = {t.cost for t in result.trials}
    assert len(costs) > 1  # the settings change what the day costs
    feasible = [t for t in result.trials if t.slo is not None and t.slo >= 0.6]
    best = result.best
    assert feasible, "the first trial runs the tier's defaults, which hold 60% on this workload"
    assert best is not None and best.slo is not None and best.slo >= 0.6
    assert best.cost == min(t.cost for t in feasible if t.cost is not None)
    # The YAML it prints is the policy that was simulated: replaying it gives the same cost and SLO.
    policy = result.policy_for(best)
    assert policy["kind"] == "min-floor" and policy["ttft_max"] == "500ms"
    replay = run_trial_for(config, text, workload, policy)
    assert replay == (best.cost, best.slo)


def test_a_trial_past_the_best_cost_is_stopped_there() -> None:
    config, text = load_config_text(TIERS)
    workload = parse_workload(WORKLOAD)
    policy = {"kind": "min-floor", "ttft_max": "500ms"}
    whole = run_trial(TrialJob(config, text, workload, "web", policy))
    assert whole.stopped is None and whole.requests > 0
    stopped = run_trial(TrialJob(config, text, workload, "web", policy, Bound(cost=whole.cost / 2)))
    assert stopped.stopped is not None and "past the best trial's" in stopped.stopped
    assert whole.cost / 2 < stopped.cost <= whole.cost and stopped.slo is None


def test_a_stopped_trial_leaves_no_fleet_behind() -> None:
    """A search worker runs trial after trial: a stopped run's fleet (its arrays are a day's requests)
    must be freed when the trial returns, not whenever the cycle collector next runs."""
    config, text = load_config_text(TIERS)
    workload = parse_workload(WORKLOAD)
    policy = {"kind": "min-floor", "ttft_max": "500ms"}
    gc.collect()
    gc.disable()  # only what the trial itself frees counts
    try:
        stopped = run_trial(TrialJob(config, text, workload, "web", policy, Bound(cost=0.01)))
        left = [o for o in gc.get_objects() if isinstance(o, Fleet)]
    finally:
        gc.enable()
    assert stopped.stopped is not None
    assert left == []


def test_a_trial_with_more_misses_than_the_slo_allows_is_stopped_there() -> None:
    config, text = load_config_text(TIERS)
    workload = parse_workload(WORKLOAD)
    policy = {"kind": "min-floor", "ttft_max": "500ms", "capacity": 400, "learn_capacity": False}  # sized to miss
    whole = run_trial(TrialJob(config, text, workload, "web", policy))
    assert whole.slo is not None and whole.slo < 1  # the spike is missed in part
    stopped = run_trial(TrialJob(config, text, workload, "web", policy, Bound(misses=0)))
    assert stopped.stopped is not None and "more than the SLO target allows (0)" in stopped.stopped
    assert stopped.cost < whole.cost


def test_the_bound_says_which_limit_a_checkpoint_is_past() -> None:
    at_two_hours = Checkpoint(7200.0, {"web": 12.5}, {"web": (990, 1000)})
    assert Bound().reason("web", at_two_hours) is None
    assert Bound(cost=12.5, misses=10).reason("web", at_two_hours) is None  # at the limits: still in the race
    assert Bound(cost=12.4).reason("web", at_two_hours) == "$12.50 by hour 2, past the best trial's $12.40"
    assert Bound(misses=9).reason("web", at_two_hours) == ("10 misses by hour 2, more than the SLO target allows (9)")


def test_the_pace_stops_a_trial_spending_past_its_margin_ahead_of_the_best_once_warmed_up() -> None:
    pace = Pace({3600.0: 10.0, 7200.0: 20.0}, warmup=7200.0, margin=0.05)
    assert pace.reason(3600.0, 30.0) is None  # still warming up: early spending says little
    assert pace.reason(7200.0, 21.0) is None  # exactly 5% ahead: still in the race
    assert pace.reason(7200.0, 21.01) == "$21.01 by hour 2, 5% ahead of the best trial's $20.00 then (pace)"
    assert pace.reason(5400.0, 99.0) is None  # no checkpoint of the best's there: nothing to compare
    paced = Bound(pace=pace).reason("web", Checkpoint(7200.0, {"web": 22.0}, {"web": (10, 10)}))
    assert paced is not None and paced.endswith("(pace)")
    idle = Pace({3600.0: 0.0, 7200.0: 0.0, 10800.0: 40.0}, warmup=0.0)  # the best was at zero for two hours
    assert idle.reason(7200.0, 0.40) is None  # 1% of the best's whole run: too little to tell
    assert idle.reason(7200.0, 0.41) is not None


def test_a_trial_records_its_cost_and_misses_at_every_checkpoint_and_a_pace_stops_it() -> None:
    config, text = load_config_text(TIERS)
    workload = parse_workload(WORKLOAD)
    policy = {"kind": "min-floor", "ttft_max": "500ms"}
    whole = run_trial(TrialJob(config, text, workload, "web", policy))
    times = [t for t, _, _ in whole.spent]
    costs = [c for _, c, _ in whole.spent]
    assert len(times) >= 10 and times == sorted(times) and costs == sorted(costs) and costs[-1] <= whole.cost
    half = {t: c / 2 for t, c, _ in whole.spent}  # a best trial that spent half as much all along
    stopped = run_trial(TrialJob(config, text, workload, "web", policy, Bound(pace=Pace(half, warmup=300.0))))
    assert stopped.stopped is not None and stopped.stopped.endswith("(pace)")
    assert stopped.stopped_at is not None and stopped.stopped_at >= 300.0


def test_trials_stopped_early_are_told_to_the_study_and_kept_off_the_frontier() -> None:
    config, text = load_config_text(TIERS)
    workload = parse_workload(WORKLOAD)
    result = tune(config, text, workload, "web", trials=6, slo_target=0.6, jobs=1, seed=1)
    stopped = [t for t in result.trials if t.stopped is not None]
    assert stopped, "some of six random settings cost more than the best so far"
    assert not set(t.number for t in stopped) & {t.number for t in result.frontier()}
    best = result.best
    assert best is not None and all((t.cost or 0) > 0 for t in stopped)


def load_config_text(text: str) -> tuple[FleetConfig, str]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tiers.yaml"
        path.write_text(text)
        return load_config(path)


def run_trial_for(
    config: FleetConfig, text: str, workload: Workload, policy: dict[str, object]
) -> tuple[float, float | None]:
    assert with_policy(config, "web", policy).tiers["web"].policy.kind == "min-floor"
    outcome = run_trial(TrialJob(config, text, workload, "web", policy))
    return outcome.cost, outcome.slo


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "tiers.yaml").write_text(TIERS)
    (tmp_path / "day.yaml").write_text(WORKLOAD)
    return tmp_path / "tiers.yaml", tmp_path / "day.yaml"


def test_an_slo_no_trial_reaches_prints_the_closest_and_exits_1(files: tuple[Path, Path], tmp_path: Path) -> None:
    tiers, day = files
    day.write_text(WORKLOAD.replace("duration: 15m", "duration: 6m").replace("ttft_target: 500ms", "ttft_target: 5ms"))
    plot = tmp_path / "frontier.png"
    result = CliRunner().invoke(
        app,
        ["tune", "-f", str(tiers), "--workload", str(day), "--tier", "web", "--trials", "2", "--jobs", "2",
         "--slo", "0.99", "--plot", str(plot)],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "no trial reached the SLO target 99.00%" in result.stderr
    pasted = yaml.safe_load(result.stdout.split("# tier web:", 1)[1].split("\n", 1)[1])
    assert pasted["policy"]["kind"] == "min-floor"
    assert plot.stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--tier", "nope"], 'no tier "nope"'),
        (["--tier", "mine"], "policy kind 'external' has no tunable settings"),
        (["--tier", "web", "--slo", "1.5"], "--slo: expected a share of requests in (0, 1]"),
        (["--tier", "web", "--trials", "0"], "--trials: expected at least 1"),
        (["--tier", "web", "--jobs", "0"], "--jobs: expected at least 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(files: tuple[Path, Path], args: list[str], needle: str) -> None:
    tiers, day = files
    result = CliRunner().invoke(app, ["tune", "-f", str(tiers), "--workload", str(day), *args])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_a_tier_without_traffic_in_the_workload_is_bad_input(files: tuple[Path, Path]) -> None:
    tiers, day = files
    day.write_text(WORKLOAD.replace("  web:\n    kind: poisson", "  other:\n    kind: poisson"))
    result = CliRunner().invoke(app, ["tune", "-f", str(tiers), "--workload", str(day), "--tier", "web"])
    assert result.exit_code == 2
    assert 'no traffic for tier "web"' in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_pace_stops_trials_only_when_asked_and_never_the_best() -> None:
    config, text = load_config_text(TIERS)
    workload = parse_workload(WORKLOAD)
    eager = PaceRule(warmup=0.0, margin=0.0)  # any trial a cent over the best's pace stops
    paced = tune(config, text, workload, "web", trials=6, slo_target=0.6, jobs=1, seed=1, pace=eager)
    exact = tune(config, text, workload, "web", trials=6, slo_target=0.6, jobs=1, seed=1, pace=None)
    assert any(t.stopped is not None and t.stopped.endswith("(pace)") for t in paced.trials)
    assert not any(t.stopped is not None and t.stopped.endswith("(pace)") for t in exact.trials)
    assert paced.best is not None and paced.best.stopped is None and paced.best.spent


def test_exact_bounds_on_the_command_line_turns_the_pace_off(
    files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    real = tune_cmd.tune

    def spy(*args: object, **kwargs: object) -> TuneResult:
        seen.append(kwargs["pace"])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tune_cmd, "tune", spy)
    tiers, day = files
    base = ["tune", "-f", str(tiers), "--workload", str(day), "--tier", "web", "--trials", "1", "--slo", "0.5"]
    for extra in ([], ["--exact-bounds"]):
        result = CliRunner().invoke(app, [*base, *extra])
        assert result.exit_code in (0, 1), result.output
    assert seen == [PACE, None]
