"""bench/shapes/: every family generates a tiers file and a workload file the project's loaders accept and
pair; the scale sets the rate, the seed the draws; a scale the suite cannot serve is refused with why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from bench.shapes import FAMILIES, GPUS, ShapeError, generate
from scalectl.simulator.controller_run import models_for
from scalectl.simulator.workloads.shapes import evaluate
from scalectl.simulator.workloads.spec import BatchLoad, PoissonLoad, TraceLoad, load_workload, parse_workload
from scalectl.tiers.config import load_config


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("gpu", ["h100-8b", "2xh100-70b"])
def test_each_family_writes_a_pair_that_loads(family: str, gpu: str, tmp_path: Path) -> None:
    files = generate(family, 11, "small", gpu, hours=2)
    tiers_path, workload_path = files.write(tmp_path)
    config, _ = load_config(tiers_path)
    workload = load_workload(workload_path)
    models = models_for(config, workload, str(workload_path))  # the tiers file serves every workload tier
    assert list(models) == list(workload.tiers) and workload.duration == 2 * 3600
    (load,) = workload.tiers.values()
    (tier,) = config.tiers.values()
    assert tier.gpu == GPUS[gpu].gpu and tier.gpu_count == GPUS[gpu].gpu_count
    if isinstance(load, BatchLoad):
        assert tier.policy.kind == "scale-to-zero" and tier.policy.max_wait == load.wait_target
    else:
        assert tier.policy.kind == "min-floor" and tier.policy.floor == 2
        assert tier.policy.ttft_max == load.ttft_target
    if isinstance(load, TraceLoad):
        assert load.replication == "independent" and load.repeat == 0


def _rate(text: str) -> float:
    (load,) = yaml.safe_load(text)["tiers"].values()
    if load["kind"] == "poisson":
        return float(load["rate"])
    if load["kind"] == "trace":
        return float(load["rate_scale"])
    return float(load["bursts"][0]["tasks"])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_scale_sets_the_rate_and_the_seed_the_draws(family: str) -> None:
    small, double = generate(family, 3, 4, "h100-8b", 3), generate(family, 3, 8, "h100-8b", 3)
    assert _rate(double.workload_yaml) == pytest.approx(2 * _rate(small.workload_yaml), rel=0.02)
    assert double.peak_rate == pytest.approx(2 * small.peak_rate, rel=0.02)
    named = generate(family, 3, "large", "h100-8b", 3)
    assert named.peak_rate > generate(family, 3, "medium", "h100-8b", 3).peak_rate > small.peak_rate * 0.99
    assert generate(family, 3, 4, "h100-8b", 3) == small  # a seed draws the same shape again
    other = generate(family, 4, 4, "h100-8b", 3)
    assert other.workload_yaml != small.workload_yaml
    assert yaml.safe_load(other.workload_yaml)["seed"] == 4


def test_a_slower_gpu_gets_a_lower_rate_for_the_same_fleet() -> None:
    h100, a100 = generate("business-day", 1, "medium", "h100-8b"), generate("business-day", 1, "medium", "a100-8b")
    assert a100.peak_rate < h100.peak_rate / 2


def test_long_contexts_have_room_in_max_model_len() -> None:
    files = generate("long-context", 1, "small", "h100-8b")
    tier = yaml.safe_load(files.tiers_yaml)["tiers"]["api"]
    load = yaml.safe_load(files.workload_yaml)["tiers"]["api"]
    assert load["input_tokens"]["max"] == 32768 and load["ttft_target"] == "1000ms"
    assert tier["serving"]["max_model_len"] >= load["input_tokens"]["max"] + load["output_tokens"]["max"]


@pytest.mark.parametrize("family", FAMILIES)
def test_an_impossible_scale_is_refused_with_why(family: str) -> None:
    with pytest.raises(ShapeError, match=r"tier max of \d+; the suite's tiers go up to 256"):
        generate(family, 1, 500, "h100-8b")
    with pytest.raises(ShapeError, match=r"(below one an hour|under 1%)"):
        generate(family, 1, 1e-7, "h100-8b")
    with pytest.raises(ShapeError, match="unknown scale 'huge'"):
        generate(family, 1, "huge", "h100-8b")
    with pytest.raises(ShapeError, match="unknown gpu 'tpu'"):
        generate(family, 1, "small", "tpu")


def test_flash_crowd_surges_fourfold_within_ten_minutes() -> None:
    for seed in range(1, 8):
        workload = parse_workload(generate("flash-crowd", seed, "small", "h100-8b").workload_yaml, "generated")
        (load,) = workload.tiers.values()
        assert isinstance(load, PoissonLoad)
        t = np.arange(0.0, workload.duration, 60.0)
        level = evaluate(load.shape, t, workload.start_epoch)
        assert level[0] == pytest.approx(0.25) and level.max() == pytest.approx(1.0)
        first_rise = int(np.argmax(level > 0.26))
        assert int(np.argmax(level >= 0.999)) - first_rise <= 10  # minutes from the first rise to 4×
