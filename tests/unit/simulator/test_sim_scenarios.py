"""The example scenarios: each tiers file fits its workload, fleet scenarios use default policy settings,
and trace paths resolve from $SCALECTL_TRACES or relative to the workload file."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalectl.simulator.controller_run import models_for
from scalectl.simulator.workloads.spec import TraceLoad, load_workload, parse_workload
from scalectl.tiers.config import load_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PAIRS = sorted(p.stem for p in (EXAMPLES / "tiers").glob("*.yaml") if (EXAMPLES / "workloads" / p.name).exists())
FLEET = [name for name in PAIRS if name.startswith("fleet-")]


def test_the_fleet_scenarios_are_there() -> None:
    assert {"fleet-business-day", "fleet-azure-code", "fleet-azure-conversation"} <= set(FLEET)


@pytest.mark.parametrize("name", PAIRS)
def test_each_tiers_file_fits_its_workload(name: str, traces_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALECTL_TRACES", str(traces_dir))
    config, _ = load_config(EXAMPLES / "tiers" / f"{name}.yaml")
    workload = load_workload(EXAMPLES / "workloads" / f"{name}.yaml")
    models = models_for(config, workload, f"{name}.yaml")
    assert set(models) == set(workload.tiers)
    for load in workload.tiers.values():
        if isinstance(load, TraceLoad) and "SCALECTL_TRACES" in load.path:
            assert workload.trace_path(load).parent == traces_dir


@pytest.mark.parametrize("name", FLEET)
def test_fleet_scenarios_set_only_bounds_gpu_and_ttft_target_by_hand(name: str) -> None:
    config, _ = load_config(EXAMPLES / "tiers" / f"{name}.yaml")
    for tier in config.tiers.values():
        assert tier.policy.model_fields_set <= {"kind", "ttft_max"}, tier.policy.model_fields_set
        assert tier.model_fields_set <= {"capacity", "gpu", "providers", "min", "max", "policy", "serving"}
        # the traffic's context is the user's to state, as the GPU is: nothing else of serving is tuned
        assert tier.serving.model_fields_set <= {"max_model_len", "context_target"}


def test_a_trace_path_default_applies_when_the_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "tiers: {c: {kind: trace, path: '${SCALECTL_TRACES:-../traces}/code.csv'}}\n"
    monkeypatch.delenv("SCALECTL_TRACES", raising=False)
    w = parse_workload(text, base_dir="/repo/examples/workloads")
    load = w.tiers["c"]
    assert isinstance(load, TraceLoad)
    assert w.trace_path(load) == Path("/repo/examples/traces/code.csv")
    monkeypatch.setenv("SCALECTL_TRACES", "/data/traces")
    assert w.trace_path(load) == Path("/data/traces/code.csv")
    monkeypatch.setenv("SCALECTL_TRACES", "")  # set but empty: the default, as in the shell
    assert w.trace_path(load) == Path("/repo/examples/traces/code.csv")
