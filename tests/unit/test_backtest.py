"""Backtest: replay a JSONL timeline through the tiers' policies; every bad input names file and line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scalectl.controller.backtest import BacktestInputError, run_backtest, run_backtest_file, tier_price_per_hour
from scalectl.sizing.gpus import gpu_info
from scalectl.tiers.config import ConfigError, FleetConfig, load_config, parse_config

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TIERS = REPO / "examples" / "tiers.yaml"
T0 = 1_773_057_600.0  # Monday 2026-03-09 12:00 UTC (08:00 in New York, EDT)

TIERS = """
tiers:
  batch:
    capacity: spot
    gpu: A100-80GB-PCIe
    providers: [simulated]
    min: 0
    max: 50
    policy: {kind: scale-to-zero, queue_per_instance: 20, activate_after: 30s, idle_after: 5m}
  chat:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 1
    max: 20
    policy: {kind: min-floor, floor: 2, capacity: 10}
"""


def config(text: str = TIERS) -> FleetConfig:
    return parse_config(text, "tiers.yaml")


def lines(*rows: dict[str, Any] | str) -> list[str]:
    return [row if isinstance(row, str) else json.dumps(row) for row in rows]


def test_state_carries_across_lines_and_each_decision_takes_effect() -> None:
    out = run_backtest(
        config(),
        lines(
            {"t": T0, "tier": "batch", "queue_depth": 37, "in_flight": 0},
            {"t": T0 + 29, "tier": "batch", "queue_depth": 37, "in_flight": 0},
            {"t": T0 + 31, "tier": "batch", "queue_depth": 37, "in_flight": 0},
            {"t": T0 + 40, "tier": "batch", "queue_depth": 50, "in_flight": 0},
        ),
        "timeline.jsonl",
    )
    assert [row["desired"] for row in out] == [0, 0, 2, 2]
    assert out[2] == {"t": T0 + 31, "tier": "batch", "desired": 2, "reason": "queue 37 > 20 × 0 for 31s → 2"}
    assert "queue 50 > 20 × 2" in out[3]["reason"]  # current is the previous desired


def test_tiers_interleave_with_their_own_state_and_start_at_min() -> None:
    out = run_backtest(
        config(),
        lines(
            {"t": T0, "tier": "chat", "queue_depth": 0},
            {"t": T0, "tier": "batch", "queue_depth": 0, "in_flight": 0},
            {"t": T0 + 10, "tier": "chat", "queue_depth": 0},
        ),
        "timeline.jsonl",
    )
    assert out[0]["desired"] == 2
    assert out[0]["reason"].endswith("1 is below the floor → 2")  # started at tier min 1
    assert out[1]["desired"] == 0
    assert out[2]["desired"] == 2


def test_current_can_be_overridden_per_line() -> None:
    out = run_backtest(
        config(),
        lines(
            {"t": T0, "tier": "chat", "queue_depth": 100, "in_flight": 0, "current": 3},
            {"t": T0 + 60, "tier": "chat", "queue_depth": 100, "in_flight": 0, "current": 3},
            {"t": T0 + 120, "tier": "chat", "queue_depth": 0, "in_flight": 20, "current": 3},
        ),
        "timeline.jsonl",
    )
    assert out[0]["desired"] == 3  # the line's count (no rate yet: hold), not the tier min 1
    # 100 in flight at 10 per instance, +25% while the forecast's error is unmeasured
    assert out[1]["desired"] == 13 and "÷ 10 in flight per instance" in out[1]["reason"]
    assert "→ hold 3" not in out[2]["reason"]  # the line's 3, below the 13 just asked: a scale-out


def test_absent_and_null_fields_are_unknown_not_zero() -> None:
    rows = [{"t": T0 + i * 60, "tier": "batch", "queue_depth": 0, "in_flight": None} for i in range(10)]
    out = run_backtest(config(), lines({"t": T0 - 1, "tier": "batch", "current": 3}, *rows), "timeline.jsonl")
    assert {row["desired"] for row in out} == {3}
    assert "in_flight unknown" in out[-1]["reason"]


def test_iso_timestamps_with_z_offset_or_naive_utc_are_accepted() -> None:
    out = run_backtest(
        config(),
        lines(
            {"t": "2026-03-09T12:00:00Z", "tier": "batch", "queue_depth": 1, "in_flight": 0},
            {"t": "2026-03-09T08:00:20-04:00", "tier": "batch", "queue_depth": 1, "in_flight": 0},
            {"t": "2026-03-09T12:00:30", "tier": "batch", "queue_depth": 1, "in_flight": 0},
        ),
        "timeline.jsonl",
    )
    assert [row["t"] for row in out] == [T0, T0 + 20, T0 + 30]
    assert out[2]["desired"] == 1


def test_blank_lines_are_skipped_but_still_counted() -> None:
    with pytest.raises(BacktestInputError, match="line 3:"):
        run_backtest(config(), ["", json.dumps({"t": T0, "tier": "batch"}), "{oops"], "timeline.jsonl")


BAD_LINES = [
    ("{oops", "malformed JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"t": T0}), '"tier": required'),
    (json.dumps({"t": T0, "tier": "gpu-heavy"}), 'unknown tier "gpu-heavy"; known tiers: batch, chat'),
    (json.dumps({"tier": "batch"}), '"t": required'),
    (json.dumps({"t": "yesterday", "tier": "batch"}), '"t": expected epoch seconds or an ISO-8601 time'),
    (json.dumps({"t": True, "tier": "batch"}), '"t": expected epoch seconds'),
    (json.dumps({"t": T0, "tier": "batch", "queue_depth": "3"}), '"queue_depth": expected a number or null, got "3"'),
    (json.dumps({"t": T0, "tier": "batch", "queue_depth": True}), '"queue_depth": expected a number or null'),
    (json.dumps({"t": T0, "tier": "batch", "in_flight": -1}), '"in_flight": expected a finite number ≥ 0'),
    ('{"t": 1, "tier": "batch", "ttft_p95_s": NaN}', '"ttft_p95_s": expected a finite number'),
    (json.dumps({"t": T0, "tier": "batch", "queue_dept": 3}), 'unknown field "queue_dept"; signal fields are: queue_'),
    (json.dumps({"t": T0, "tier": "batch", "current": 1.5}), '"current": expected a whole number'),
    (json.dumps({"t": T0, "tier": "batch", "current": -1}), '"current": expected a whole number'),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_bad_lines_raise_naming_file_line_and_problem(line: str, message: str) -> None:
    good = json.dumps({"t": T0 - 100, "tier": "chat", "queue_depth": 0})
    with pytest.raises(BacktestInputError) as caught:
        run_backtest(config(), [good, line], "timeline.jsonl")
    assert str(caught.value).startswith("timeline.jsonl: line 2: ")
    assert message in str(caught.value)


def test_time_going_backwards_within_a_tier_is_refused_but_other_tiers_may_interleave() -> None:
    ok = lines(
        {"t": T0 + 10, "tier": "batch", "queue_depth": 0, "in_flight": 0},
        {"t": T0, "tier": "chat", "queue_depth": 0},
        {"t": T0 + 10, "tier": "batch", "queue_depth": 0, "in_flight": 0},  # equal time is fine
    )
    assert len(run_backtest(config(), ok, "timeline.jsonl")) == 3
    bad = [*ok, json.dumps({"t": T0 + 5, "tier": "batch", "queue_depth": 0})]
    with pytest.raises(BacktestInputError, match=r'line 4: time goes backwards for tier "batch".*\(line 3\)'):
        run_backtest(config(), bad, "timeline.jsonl")


def test_budget_clamp_uses_catalogue_price_spot_for_spot_tiers() -> None:
    text = TIERS.replace("max: 50", "max: 50\n    budget_per_hour: 1.5").replace(
        "max: 20", "max: 20\n    budget_per_hour: 5.0"
    )
    cfg = config(text)
    spot, on_demand = gpu_info("A100-80GB-PCIe").spot_per_hour, gpu_info("A100-80GB-PCIe").on_demand_per_hour
    assert spot is not None and tier_price_per_hour(cfg.tiers["batch"]) == pytest.approx(spot)  # A100 PCIe spot
    assert tier_price_per_hour(cfg.tiers["chat"]) == pytest.approx(2.40)
    out = run_backtest(
        cfg,
        lines(
            {"t": T0, "tier": "batch", "queue_depth": 500, "in_flight": 0},
            {"t": T0 + 30, "tier": "batch", "queue_depth": 500, "in_flight": 0},
            {"t": T0, "tier": "chat", "queue_depth": 500},
            {"t": T0 + 60, "tier": "chat", "queue_depth": 500},
        ),
        "timeline.jsonl",
    )
    assert int(1.5 // on_demand) == 1  # the on-demand price would have allowed only one...
    assert out[1]["desired"] == int(1.5 // spot) == 2  # ...the spot price allows two
    assert f"budget $1.5/h ÷ ${spot:g}/h" in out[1]["reason"]
    assert out[3]["desired"] == 2  # floor(5 / 2.40)


def test_gpu_count_multiplies_the_price() -> None:
    cfg = config(TIERS.replace("gpu: H100-SXM5-80GB", "gpu: H100-SXM5-80GB\n    gpu_count: 4"))
    assert tier_price_per_hour(cfg.tiers["chat"]) == pytest.approx(9.60)


def test_external_tier_runs_the_user_class_and_bad_class_names_the_tier() -> None:
    text = """
tiers:
  agents:
    capacity: on-demand
    gpu: L40S
    providers: [simulated]
    min: 1
    max: 8
    policy:
      kind: external
      class: "examples.policies.target_tracking:RequestRateTargetTracking"
      options: {target_rps: 10}
"""
    out = run_backtest(config(text), lines({"t": T0, "tier": "agents", "request_rate": 35}), "timeline.jsonl")
    assert out[0]["desired"] == 4
    broken = config(text.replace("RequestRateTargetTracking", "Missing"))
    with pytest.raises(BacktestInputError, match=r'^tiers.yaml: tier "agents": policy.class: .*has no class'):
        run_backtest(broken, lines({"t": T0, "tier": "agents"}), "timeline.jsonl", config_source="tiers.yaml")


def test_the_example_tiers_file_runs_over_a_day(tmp_path: Path) -> None:
    cfg, _ = load_config(EXAMPLE_TIERS)
    rows = []
    for minute in range(0, 24 * 60, 5):
        t = T0 - 12 * 3600 + minute * 60
        busy = 8 * 60 <= minute < 18 * 60
        orchestrator = {"queue_depth": 45 if busy else 3, "requests_running": 600 if busy else 60, "ttft_p95_s": 0.2}
        rows.append({"t": t, "tier": "orchestrator", **orchestrator})
        rows.append({"t": t, "tier": "research", "queue_depth": 120 if busy else 0, "in_flight": 0})
        rows.append({"t": t, "tier": "support-daytime", "queue_depth": 12, "requests_running": 90})
    path = tmp_path / "day.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = run_backtest_file(EXAMPLE_TIERS, path)
    assert len(out) == len(rows)
    for row in out:
        tier = cfg.tiers[row["tier"]]
        assert tier.min <= row["desired"] <= tier.max
        assert isinstance(row["t"], float) and row["reason"]
    by_tier = {name: [r["desired"] for r in out if r["tier"] == name] for name in cfg.tiers}
    assert max(by_tier["research"]) == 6 and by_tier["research"][-1] == 0
    assert max(by_tier["orchestrator"]) >= 5
    assert max(by_tier["support-daytime"]) >= 8  # the 08:00–18:00 New York window with 30 % headroom


def test_file_wrapper_reports_unreadable_files_and_config_errors(tmp_path: Path) -> None:
    with pytest.raises(BacktestInputError, match=r"missing\.jsonl: cannot read the file"):
        run_backtest_file(EXAMPLE_TIERS, tmp_path / "missing.jsonl")
    bad_tiers = tmp_path / "tiers.yaml"
    bad_tiers.write_text("tiers: {x: {}}\n")
    with pytest.raises(ConfigError):
        run_backtest_file(bad_tiers, tmp_path / "missing.jsonl")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(BacktestInputError, match="not UTF-8"):
        run_backtest_file(EXAMPLE_TIERS, binary)


def test_epoch_output_matches_iso_input() -> None:
    iso = datetime.fromtimestamp(T0, UTC).isoformat()
    out = run_backtest(config(), lines({"t": iso, "tier": "batch"}), "timeline.jsonl")
    assert out[0]["t"] == T0
