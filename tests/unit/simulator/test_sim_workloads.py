from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalectl.simulator.workloads.shapes import DailyShape, DiurnalShape, SpikeShape, evaluate
from scalectl.simulator.workloads.sources import BatchTasks, KeptArrivals, PoissonSource, TraceSource, sessions_source
from scalectl.simulator.workloads.spec import WorkloadError, load_workload, parse_workload
from scalectl.sizing.engine import build_profile

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "workloads"
MONDAY_NY = parse_workload("tiers: {a: {kind: poisson, rate: 1}}\nstart: 2026-03-16T00:00:00-04:00").start_epoch


def test_diurnal_is_ten_times_busier_in_business_hours_in_its_timezone() -> None:
    shape = DiurnalShape(kind="diurnal", peak="08:00-18:00", timezone="America/New_York", low=0.1, ramp=3600)
    hours = np.arange(0, 24) * 3600.0 + 1800.0  # half past each local hour (start is local midnight)
    values = shape.values(hours, MONDAY_NY)
    assert values[12] == pytest.approx(1.0) and values[3] == pytest.approx(0.1)
    assert values[12] / values[3] == pytest.approx(10.0)
    assert values[7] == pytest.approx(0.1 + 0.9 * 0.5)  # half-way up the morning ramp
    # The same shape read in UTC peaks four hours earlier in virtual time.
    utc = DiurnalShape(kind="diurnal", peak="08:00-18:00", timezone="UTC", low=0.1, ramp=3600).values(hours, MONDAY_NY)
    assert utc[12 - 4] == pytest.approx(1.0) and utc[22] == pytest.approx(0.1)


def test_weekend_factor_applies_on_saturday() -> None:
    shape = DiurnalShape(kind="diurnal", peak="08:00-18:00", timezone="America/New_York", low=0.1, weekend=0.5)
    noon = np.array([12 * 3600.0, 5 * 86400 + 12 * 3600.0])  # Monday noon, Saturday noon
    assert shape.values(noon, MONDAY_NY).tolist() == pytest.approx([1.0, 0.5])


def test_spike_adds_thirty_percent_for_ten_minutes_and_shapes_multiply() -> None:
    spike = SpikeShape(kind="spike", at=3600.0, duration=600.0, factor=1.3)
    t = np.array([3599.0, 3600.0, 4199.0, 4200.0])
    assert spike.values(t, 0.0).tolist() == [1.0, 1.3, 1.3, 1.0]
    daily = DailyShape(kind="daily", points=[("00:00", 0.5), ("12:00", 1.0)])
    both = evaluate([daily, spike], np.array([3600.0]), MONDAY_NY)
    assert both[0] == pytest.approx(1.3 * daily.values(np.array([3600.0]), MONDAY_NY)[0])


def test_poisson_arrivals_follow_the_shape_and_ignore_the_tick_length() -> None:
    text = """
seed: 9
start: 2026-03-16T00:00:00-04:00
tiers:
  a: {kind: poisson, rate: 10, shape: [{kind: diurnal, peak: "08:00-18:00", timezone: America/New_York, low: 0.1}]}
"""
    workload = parse_workload(text)
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    a = PoissonSource("a", workload.tiers["a"], workload, profile)  # type: ignore[arg-type]
    b = PoissonSource("a", workload.tiers["a"], workload, profile)  # type: ignore[arg-type]
    day = np.concatenate([a.arrivals(t, t + 5.0).col(0) for t in np.arange(0, 86400, 5.0)])
    coarse = np.concatenate([b.arrivals(t, t + 30.0).col(0) for t in np.arange(0, 86400, 30.0)])
    assert np.array_equal(day, coarse)
    per_hour = np.bincount((day // 3600).astype(int), minlength=24)
    assert per_hour[13] == pytest.approx(36_000, rel=0.05)
    assert per_hour[3] == pytest.approx(3_600, rel=0.1)


def test_same_seed_same_requests_different_seed_different() -> None:
    text = "seed: {s}\ntiers: {{a: {{kind: poisson, rate: 5, input_tokens: {{mean: 500, cv: 0.5}}}}}}"
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")

    def draw(seed: int) -> np.ndarray:
        w = parse_workload(text.format(s=seed))
        return PoissonSource("a", w.tiers["a"], w, profile).arrivals(0, 600).data  # type: ignore[arg-type]

    assert np.array_equal(draw(1), draw(1), equal_nan=True)
    assert not np.array_equal(draw(1)[:10], draw(2)[:10])


def test_kept_arrivals_are_the_same_requests_shared_read_only_within_a_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "seed: {s}\ntiers: {{a: {{kind: poisson, rate: 5, input_tokens: {{mean: 500, cv: 0.5}}}}}}"
    profile = build_profile("H100-SXM5-80GB", "llama-3.1-8b")

    def arrivals(seed: int, t0: float = 0.0, t1: float = 600.0) -> np.ndarray:
        w = parse_workload(text.format(s=seed))
        return PoissonSource("a", w.tiers["a"], w, profile).arrivals(t0, t1).data  # type: ignore[arg-type]

    fresh = arrivals(1)
    kept = KeptArrivals(limit=40_000)  # two hours at 5/s fit (18,000 each), a third does not
    monkeypatch.setattr("scalectl.simulator.workloads.sources.KEPT", kept)
    assert np.array_equal(arrivals(1), fresh, equal_nan=True) and not kept._drawn  # off until asked
    kept.keep()
    assert np.array_equal(arrivals(1), fresh, equal_nan=True)  # drawn and kept
    assert np.array_equal(arrivals(1), fresh, equal_nan=True)  # from the kept hour
    assert not np.array_equal(arrivals(2)[:10], fresh[:10])  # another seed is other traffic
    assert len(kept._drawn) == 2
    block = next(iter(kept._drawn.values()))
    with pytest.raises(ValueError, match="read-only"):
        block.t[0] = 0.0
    arrivals(1, 3600.0, 3700.0)
    assert len(kept._drawn) == 2 and kept._rows <= kept.limit  # past the limit: drawn, not kept


def test_sessions_follow_the_shape() -> None:
    text = """
start: 2026-03-16T00:00:00+00:00
tiers:
  s: {kind: sessions, sessions: 50, shape: [{kind: spike, at: 1h, duration: 10m, factor: 1.3}]}
"""
    w = parse_workload(text)
    src = sessions_source("s", w.tiers["s"], w, build_profile("H100-SXM5-80GB", "llama-3.1-8b"))  # type: ignore[arg-type]
    assert src.max_sessions == 65
    assert src._active(0.0) == 50 and src._active(3700.0) == 65


def test_batch_bursts_repeat_and_land_within_their_minute() -> None:
    text = (
        "tiers: {b: {kind: batch, bursts: [{at: 1h, tasks: 500, over: 1m, every: 2h}], task_time: 30s}}\nduration: 6h"
    )
    w = parse_workload(text)
    t, run = BatchTasks("b", w.tiers["b"], w).all_tasks(w.duration)  # type: ignore[arg-type]
    assert t.shape[0] == 1500
    assert np.all(run == 30.0)
    starts = np.array([3600.0, 3 * 3600.0, 5 * 3600.0])
    assert all(((t >= s) & (t < s + 60)).sum() == 500 for s in starts)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("tiers: {a: {kind: poisson}}", 'tier "a": rate: required field is missing'),
        ("tiers: {a: {kind: nope}}", 'tier "a": `kind` must be one of'),
        ("tiers: {a: {kind: poisson, rate: 1, ttft_target: soon}}", 'tier "a": ttft_target: expected a duration'),
        ("tiers: {a: {kind: poisson, rate: 1, extra: 1}}", 'tier "a": extra: unknown field'),
        (
            "tiers: {a: {kind: sessions, sessions: 5, think_time: [2s, 1s]}}",
            'tier "a": think_time: expected [min, max]',
        ),
        ("tiers: {a: {kind: poisson, rate: 1, shape: [{kind: diurnal, timezone: Mars/Base}]}}", "IANA timezone"),
        ("tiers: {a: {kind: batch}}", "needs `bursts`"),
        ("start: yesterday\ntiers: {a: {kind: poisson, rate: 1}}", "start: expected an ISO time"),
        ("tiers: [", "invalid YAML"),
        ("seed: 1", "top-level `tiers:`"),
    ],
)
def test_workload_errors_name_the_file_tier_and_field(text: str, needle: str) -> None:
    with pytest.raises(WorkloadError) as err:
        parse_workload(text, "day.yaml")
    assert str(err.value).startswith("day.yaml: ")
    assert needle in str(err.value)


@pytest.mark.parametrize("name", ["support-business-day", "batch-night", "spot-storm", "azure-conversation"])
def test_example_workloads_load(name: str, traces_dir: Path) -> None:
    path = EXAMPLES / f"{name}.yaml"
    workload = load_workload(path)
    assert workload.tiers and workload.duration > 0
    for tier, load in workload.tiers.items():
        if load.kind == "trace":
            # The example's relative path works from a checkout next to the shared folder; check the file
            # it names exists in the shared traces folder, then read it from there.
            assert Path(load.path).name in {p.name for p in traces_dir.iterdir()}
            moved = workload.model_copy(update={"base_dir": str(traces_dir.parents[1] / "a" / "b" / "c")})
            source = TraceSource(tier, load, moved, build_profile("H100-SXM5-80GB", "llama-3.1-8b"))
            assert len(source.arrival_times(0.0, workload.duration)) > 19_366 * 10  # tiled over the day


def test_trace_paths_are_relative_to_the_workload_file(tmp_path: Path, traces_dir: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "day.yaml").write_text("tiers: {c: {kind: trace, path: ../t/code.csv}}\nduration: 1h\n")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "code.csv").symlink_to(traces_dir / "azure-llm-2023-code.csv")
    w = load_workload(tmp_path / "w" / "day.yaml")
    src = TraceSource("c", w.tiers["c"], w, build_profile("H100-SXM5-80GB", "llama-3.1-8b"))  # type: ignore[arg-type]
    assert len(src.arrival_times(0.0, w.duration)) == 8_819
