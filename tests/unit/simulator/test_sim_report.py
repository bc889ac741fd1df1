from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from scalectl.simulator.plot import PlotFrame, plot_report
from scalectl.simulator.report import BaselineOutcome, Report, TierOutcome


def _tier(name: str, kind: str, met: int, known: int, cost: float, lost: int = 0) -> TierOutcome:
    serving = kind == "serving"
    return TierOutcome(
        name, kind, known, 0.5 if serving else 300.0, met, known,
        0.08 if serving else None, 0.2 if serving else None, 0.3 if serving else None, 1.5 if serving else None,
        2.5 if serving else None, None if serving else 10.0, None if serving else 100.0,
        cost, cost / 2.4, 3, 1, 2, lost,
    )  # fmt: skip


def _report() -> Report:
    tiers = {"chat": _tier("chat", "serving", 990, 1000, 48.0), "jobs": _tier("jobs", "batch", 45, 50, 12.0)}
    baselines = {
        "chat": {
            "static": BaselineOutcome("static", 96.0, 40.0, 0.999),
            "reactive": BaselineOutcome("reactive", 50.0, 21.0, 0.95),
            "oracle": BaselineOutcome("oracle", 40.0, 16.7, None),
            "clairvoyant": BaselineOutcome("clairvoyant", 44.0, 18.3, None, boot_s=6000.0, kept_s=0.0, launches=20),
        },
        "jobs": {
            "static": BaselineOutcome("static", 30.0, 12.5, 1.0),
            "reactive": BaselineOutcome("reactive", 14.0, 6.0, 0.9),
            "oracle": BaselineOutcome("oracle", 8.0, 3.3, None),
            "clairvoyant": BaselineOutcome("clairvoyant", 10.0, 4.2, None, boot_s=1800.0, kept_s=0.0, launches=6),
        },
    }
    t = np.arange(5.0, 3605.0, 5.0)
    timelines = {
        "chat": {"t": t, "load": np.full(t.shape, 60.0), "ready": np.full(t.shape, 2.0), "running": t * 0,
                 "queue": t * 0, "t_q": np.arange(30.0, 3600.0, 60.0), "ttft_p95": np.full(60, 0.2)},
        "jobs": {"t": t, "load": t * 0, "ready": t * 0, "running": t * 0, "queue": t * 0},
    }  # fmt: skip
    return Report(3600.0, tiers, baselines, timelines)


def test_totals_and_ratios() -> None:
    report = _report()
    total = report.total()
    assert total["requests"] == 1050
    assert total["slo_attainment"] == pytest.approx((990 + 45) / 1050)
    assert total["cost"] == 60.0 and total["oracle_cost"] == 48.0 and total["static_cost"] == 126.0
    assert total["cost_vs_oracle"] == pytest.approx(60 / 48)
    assert total["cost_vs_static"] == pytest.approx(60 / 126)
    assert total["interruptions"] == 2 and total["retries"] == 4
    d = report.to_dict()
    assert d["tiers"]["chat"]["cost_vs_oracle"] == pytest.approx(1.2)
    assert d["tiers"]["jobs"]["slo_attainment"] == pytest.approx(0.9)
    assert d["tiers"]["chat"]["baselines"]["reactive"]["slo_attainment"] == 0.95


def test_every_run_is_divided_by_the_oracle_and_by_the_clairvoyant() -> None:
    report = _report()
    total = report.total()
    assert total["clairvoyant_cost"] == 54.0 and total["cost_vs_clairvoyant"] == pytest.approx(60 / 54)
    assert total["reactive_cost_vs_oracle"] == pytest.approx(64 / 48)
    assert total["reactive_cost_vs_clairvoyant"] == pytest.approx(64 / 54)
    chat = report.to_dict()["tiers"]["chat"]
    assert chat["cost_vs_clairvoyant"] == pytest.approx(48 / 44)
    assert chat["baselines"]["static"]["cost_vs_oracle"] == pytest.approx(96 / 40)
    assert chat["baselines"]["static"]["cost_vs_clairvoyant"] == pytest.approx(96 / 44)
    assert chat["baselines"]["clairvoyant"]["boot_s"] == 6000.0
    console = Console(record=True, width=100)
    console.print(report.bounds_table())
    rows = {tuple(line.split()[:2]): line.split()[-2:] for line in console.export_text().splitlines() if line.strip()}
    assert rows[("total", "reactive")] == ["1.33×", "1.19×"]  # 64 ÷ 48, 64 ÷ 54
    assert rows[("chat", "ours")] == ["1.20×", "1.09×"]
    assert rows[("total", "clairvoyant")] == ["1.12×", "1.00×"]  # what the boots cost beyond the oracle


def test_a_max_below_the_oracles_busiest_minute_is_a_warning() -> None:
    report = _report()
    report.baselines["chat"]["oracle"] = BaselineOutcome("oracle", 40.0, 16.7, None, peak=12)
    assert report.bound_warnings({"chat": 12, "jobs": 1}) == []  # at the peak: reachable
    (line,) = report.bound_warnings({"chat": 11, "jobs": 1})  # jobs' oracle has no peak: nothing to say
    assert "tier chat" in line and "12 instances" in line and "max of 11" in line and "raise `max`" in line
    report.warnings = [line]
    assert report.to_dict()["warnings"] == [line]
    assert "warnings" not in _report().to_dict()


@pytest.mark.parametrize(("static_slo", "warned"), [(0.995, False), (0.9949, True)])
def test_a_target_a_static_peak_fleet_misses_is_a_warning(static_slo: float, warned: bool) -> None:
    """A TTFT target under the requests' own tail: even the oracle's busiest-minute fleet, all day, misses."""
    report = _report()
    report.baselines["chat"]["oracle"] = BaselineOutcome("oracle", 40.0, 16.7, None, peak=12)
    report.baselines["chat"]["static"] = BaselineOutcome("static", 90.0, 36.0, static_slo)
    lines = report.reach_warnings(0.995)
    assert bool(lines) is warned
    if warned:
        (line,) = lines
        assert line.startswith("tier chat: a static fleet of 12 (the oracle's busiest minute) all day held only 99.49%")
        assert "raise the TTFT target" in line


def test_tables_fit_100_columns_and_the_plot_is_a_png(tmp_path: Path) -> None:
    report = _report()
    report.tiers["support-daytime"] = report.tiers.pop("chat")  # a realistic name, 15 characters
    report.baselines["support-daytime"] = report.baselines.pop("chat")
    report.timelines["support-daytime"] = report.timelines.pop("chat")
    console = Console(record=True, width=100)
    for table in report.tables():
        console.print(table)
    text = console.export_text()
    assert "support-daytime" in text and "1.20×" in text and "99.00%" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert "÷SkyServe" in text and "TTFT p50/95/99" in text and "…" not in text  # nothing cut short
    assert "÷clairv." in text and "÷clairvoyant" in text and "clairvoyant" in text
    frame = PlotFrame(scenario="day", start_epoch=1_773_633_600.0, policy_ttft_targets={"support-daytime": 0.4})
    out = plot_report(report, tmp_path / "day.png", frame)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_requests_cut_by_the_clients_timeout_are_counted_and_said() -> None:
    report = _report()
    assert report.timeout_lines() == []
    chat = report.tiers["chat"]
    report.tiers["chat"] = replace(chat, timed_out=7)
    assert report.total()["timed_out"] == 7
    assert report.to_dict()["tiers"]["chat"]["timed_out"] == 7
    (line,) = report.timeout_lines()
    assert line.startswith("tier chat: 7 requests (0.70%)") and "counted as misses" in line


def test_time_axis_labels_do_not_overlap_on_a_days_run() -> None:
    """A day's run on a half-width panel: the tick labels, as drawn, do not run into each other."""
    import matplotlib

    matplotlib.use("Agg")
    from datetime import UTC, datetime

    import matplotlib.pyplot as plt

    from scalectl.simulator.plot import time_axis

    start = datetime(2026, 3, 16, tzinfo=UTC).timestamp()
    clock = [datetime.fromtimestamp(start + m * 60, UTC) for m in range(0, 24 * 60 + 1, 5)]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for ax in axes:
        ax.plot(clock, range(len(clock)))
        time_axis(ax, UTC)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [t.get_window_extent(renderer) for t in axes[0].get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert 3 <= len(boxes) <= 7
    for a, b in itertools.pairwise(boxes):
        assert a.x1 < b.x0, "two time labels overlap"
