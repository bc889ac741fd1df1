"""What `scalectl tune` shows: the best settings as YAML to paste, the cost/SLO frontier (table and PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scalectl.simulator.tune import TrialResult, TuneResult


def best_yaml(result: TuneResult) -> str:
    """The tier's ``policy:`` block with the chosen trial's settings, ready to paste under the tier."""
    chosen = result.best or result.closest
    if chosen is None:
        return ""
    verdict = "meets" if result.best is not None else "does NOT meet"
    header = (
        f"# tier {result.tier}: trial {chosen.number} of {len(result.trials)}, cost ${chosen.cost:,.2f}, "
        f"SLO {100 * (chosen.slo or 0.0):.2f}% ({verdict} the {100 * result.slo_target:.2f}% target)\n"
    )
    return header + yaml.safe_dump({"policy": result.policy_for(chosen)}, sort_keys=False)


def to_dict(result: TuneResult) -> dict[str, Any]:
    def trial(t: TrialResult) -> dict[str, Any]:
        return {
            "number": t.number, "cost": t.cost, "slo": t.slo, "params": t.params, "error": t.error,
            "stopped": t.stopped, "stopped_at_s": t.stopped_at,
        }  # fmt: skip

    best = result.best
    chosen = best or result.closest
    return {
        "tier": result.tier,
        "slo_target": result.slo_target,
        "reached": best is not None,
        "best": trial(best) if best else None,
        "closest": trial(chosen) if best is None and chosen else None,
        "policy": result.policy_for(chosen) if chosen else None,
        "frontier": [trial(t) for t in result.frontier()],
        "trials": [trial(t) for t in result.trials],
    }


def frontier_table(result: TuneResult) -> Any:
    """A rich Table: the trials no other beats on both cost and SLO, with the settings that differ."""
    from rich.table import Table

    table = Table(title=f"cost / SLO frontier of {len(result.trials)} trials (target {100 * result.slo_target:.2f}%)")
    for col in ("trial", "cost $", "SLO", "meets", "settings"):
        table.add_column(col, justify="left" if col == "settings" else "right")
    best = result.best
    for t in result.frontier():
        mark = (
            "best" if best is not None and t.number == best.number else ("yes" if t.feasible(result.slo_target) else "")
        )
        settings = ", ".join(f"{k}={v:g}" for k, v in t.params.items())
        table.add_row(str(t.number), f"{t.cost:,.2f}", f"{100 * (t.slo or 0.0):.2f}%", mark, settings)
    return table


def plot(result: TuneResult, path: str | Path) -> Path:
    """PNG: every trial's cost against its SLO, the frontier, the target and the best."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [t for t in result.trials if t.finished]
    fig, ax = plt.subplots(figsize=(8, 5))
    ok = [t for t in done if t.feasible(result.slo_target)]
    bad = [t for t in done if not t.feasible(result.slo_target)]
    ax.scatter(
        [100 * (t.slo or 0) for t in bad], [t.cost or 0.0 for t in bad], color="tab:gray", s=18, label="misses the SLO"
    )
    ax.scatter(
        [100 * (t.slo or 0) for t in ok], [t.cost or 0.0 for t in ok], color="tab:green", s=18, label="meets the SLO"
    )
    front = result.frontier()
    ax.step([100 * (t.slo or 0) for t in front], [t.cost or 0 for t in front], where="post", color="tab:blue",
            lw=1, label="frontier")  # fmt: skip
    ax.axvline(100 * result.slo_target, color="black", ls=":", lw=1, label="SLO target")
    if result.best is not None:
        ax.scatter([100 * (result.best.slo or 0)], [result.best.cost or 0.0], marker="*", s=160, color="tab:red",
                   label="best", zorder=3)  # fmt: skip
    ax.set_xlabel("SLO attainment (% of requests with TTFT within the target)")
    ax.set_ylabel("cost $")
    ax.set_title(f"scalectl tune: tier {result.tier}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
