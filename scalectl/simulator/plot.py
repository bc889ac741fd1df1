"""The PNG of a simulated run (matplotlib, the ``plot`` extra): per tier, load with ready and billed
instances on whole-number axes, and TTFT p95 in milliseconds against the policy's target (or the Celery
queue), on clock time in the workload's zone, under a title with the scenario, cost and SLO."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

import numpy as np

from scalectl.simulator.report import Report


@dataclass(frozen=True, slots=True)
class PlotFrame:
    """What the plot needs beyond the report: the scenario's name, the clock the workload starts at (and its
    zone), and each tier's policy TTFT target (what the autoscaler aims at; the score's SLO may differ)."""

    scenario: str = ""
    start_epoch: float = 0.0
    zone: tzinfo = UTC
    policy_ttft_targets: Mapping[str, float] = field(default_factory=dict)


def plot_report(report: Report, path: str | Path, frame: PlotFrame | None = None) -> Path:
    """PNG: per tier, load and instances over time, and TTFT p95 (or the queue) against the target."""
    path = Path(path)
    frame = frame or PlotFrame()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    zone = frame.zone
    names = list(report.tiers)
    fig, axes = plt.subplots(len(names), 2, figsize=(13, 3.4 * len(names) + 0.6), squeeze=False)
    for row, name in enumerate(names):
        series = report.series().get(name, {})
        if not series:
            continue
        clock = _clock(series["t"], frame.start_epoch, zone)
        left, right = axes[row]
        lines = left.plot(clock, series["load"], lw=0.8, color="tab:blue", label="arrivals per minute")
        left.set_ylabel("arrivals / min")
        left.set_ylim(bottom=0)
        cap = left.twinx()
        lines += cap.step(clock, series["ready"], where="post", color="tab:green", lw=1.2, label="ready instances")
        top = float(np.max(series["ready"])) if len(series["ready"]) else 0.0
        if "billed" in series:
            lines += cap.step(
                clock, series["billed"], where="post", color="tab:olive", lw=0.8, ls="--", label="billed instances"
            )
            top = max(top, float(np.max(series["billed"])))
        cap.set_ylabel("instances")
        cap.set_ylim(0, max(2.0, np.ceil(top * 1.15)))  # whole instances, never a 0.96–1.04 axis
        cap.yaxis.set_major_locator(MaxNLocator(integer=True))
        left.legend(lines, [str(line.get_label()) for line in lines], loc="upper left", fontsize=7)
        left.set_title(f"{name}: load and instances")
        outcome = report.tiers[name]
        if outcome.kind == "serving" and "t_q" in series:
            _latency_panel(right, series, frame, name, outcome.slo_target_s, zone)
        else:
            right.plot(clock, series["queue"], lw=0.8, color="tab:purple", label="queue depth")
            right.plot(clock, series["running"], lw=0.8, color="tab:orange", label="in flight")
            right.set_ylabel("tasks")
            right.set_ylim(bottom=0)
            right.yaxis.set_major_locator(MaxNLocator(integer=True))
            right.set_title(f"{name}: Celery queue")
            right.legend(loc="upper right", fontsize=7)
        for ax in (left, right):
            time_axis(ax, zone)
            ax.set_xlabel(f"time ({_zone_name(zone, frame.start_epoch)})")
    fig.suptitle(_title(report, frame), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def time_axis(ax: Any, zone: tzinfo) -> None:
    """Clock-time ticks that never overlap on a half-width panel: at most six, labelled concisely (hours, with
    the day where it changes). A fixed "%a %H:%M" on the default locator put a label every two hours on a
    day's run, and they ran into each other."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(tz=zone, minticks=3, maxticks=6)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=zone))


def _latency_panel(ax: Any, series: dict[str, Any], frame: PlotFrame, name: str, slo_s: float, zone: tzinfo) -> None:
    ax.plot(
        _clock(series["t_q"], frame.start_epoch, zone),
        series["ttft_p95"] * 1e3,
        lw=0.8,
        color="tab:red",
        label="TTFT p95 per minute",
    )
    target = frame.policy_ttft_targets.get(name)
    if target is not None:
        ax.axhline(target * 1e3, color="black", ls="--", lw=1, label=f"policy target {target * 1e3:.0f} ms")
    if target is None or abs(target - slo_s) > 1e-9:
        ax.axhline(slo_s * 1e3, color="grey", ls=":", lw=1, label=f"SLO (score) {slo_s * 1e3:.0f} ms")
    # A linear axis up to a few times the target: a 10-second stall is clipped, not allowed to flatten
    # the minutes that matter; the clipped share is said in the title.
    reference_ms = max(slo_s, target or 0.0) * 1e3
    p95_ms = np.asarray(series["ttft_p95"]) * 1e3
    busiest = float(np.quantile(p95_ms, 0.99)) * 1.1 if len(p95_ms) else 0.0
    ceiling = min(max(busiest, 2 * reference_ms), 10 * reference_ms)
    above = float(np.mean(p95_ms > ceiling)) if len(p95_ms) else 0.0
    ax.set_ylim(0, ceiling)
    ax.set_ylabel("milliseconds")
    clipped = f" ({100 * above:.1f}% of minutes above the axis)" if above > 0 else ""
    ax.set_title(f"{name}: TTFT p95 per minute{clipped}")
    ax.legend(loc="upper right", fontsize=7)


def _clock(seconds: Any, start_epoch: float, zone: tzinfo) -> list[datetime]:
    return [datetime.fromtimestamp(start_epoch + float(s), zone) for s in np.asarray(seconds)]


def _title(report: Report, frame: PlotFrame) -> str:
    total = report.total()
    slo = total["slo_attainment"]
    parts = [frame.scenario or "simulated run", f"{report.duration_s / 3600:g} h", f"${total['cost']:,.2f}"]
    parts.append("SLO met: -" if slo is None else f"SLO met {100 * slo:.2f}%")
    if total.get("cost_vs_oracle") is not None:
        parts.append(f"{total['cost_vs_oracle']:.2f}× oracle")
    return " · ".join(parts)


def _zone_name(zone: tzinfo, at: float) -> str:
    return getattr(zone, "key", None) or datetime.fromtimestamp(at, zone).tzname() or "UTC"
