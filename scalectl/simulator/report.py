"""What a simulated day cost and how well it served: per tier and total, against the baselines.

Three renderings: a dict (JSON), a rich table, and a PNG of load, capacity and TTFT over time.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from scalectl.simulator.fleet import Fleet
from scalectl.simulator.workloads.spec import BatchLoad


@dataclass(frozen=True, slots=True)
class TierOutcome:
    """One tier over one run (ours or a baseline)."""

    tier: str
    kind: str  # "serving" or "batch"
    requests: int  # requests (serving) or tasks (batch) that arrived
    slo_target_s: float
    slo_met: int  # requests with TTFT <= target / tasks started within the wait target
    slo_known: int  # requests whose outcome is known (first token delivered, or already past the target)
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    wait_p50_s: float | None  # batch: queue wait before the first start
    wait_p95_s: float | None
    cost: float
    gpu_hours: float
    peak_instances: int
    interruptions: int
    retries: int
    lost_tasks: int
    timed_out: int = 0  # serving: requests whose clients gave up before a first token (counted as misses)
    refused: int = 0  # serving: requests the activator refused at zero, holding its most (counted as misses)
    rejected_too_long: int = 0  # serving: refused by vLLM, prompt + output over max_model_len (counted as misses)
    preemptions: int = 0  # serving: sequences vLLM preempted for KV cache blocks (recomputed later)
    pool_storage_cost: float = 0.0  # $ of ``cost`` that stopped warm pool members' disks billed
    # boots by path: cold creates, warm starts of pool members, and starts refused or not serving in time
    boots: dict[str, int] = field(default_factory=lambda: {"warm": 0, "cold": 0, "resume_failed": 0})
    # a tier with variants: instance-hours on each hardware (``H100-SXM5-80GB``, ``2× L40S-48GB``); else empty
    variants: dict[str, float] = field(default_factory=dict)

    @property
    def slo_attainment(self) -> float | None:
        return self.slo_met / self.slo_known if self.slo_known else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "slo_attainment": self.slo_attainment}


def _share(part: int, whole: int) -> str:
    return pct(part / whole if whole else None)


def _qs(values: np.ndarray, *qs: float) -> list[float | None]:
    """Quantiles from one partial sort of the values (a day's TTFTs are millions)."""
    if not values.shape[0]:
        return [None] * len(qs)
    return [float(x) for x in np.quantile(values, qs)]


def outcomes(fleet: Fleet, duration_s: float) -> dict[str, TierOutcome]:
    """Per-tier outcomes of a finished run."""
    out = {}
    for name, model in fleet.models.items():
        meter = fleet.meters[name]
        hours = fleet.instance_seconds(name) / 3600.0
        cost = hours * model.price_per_hour
        gpu_hours = hours * model.gpu_count
        if isinstance(model.load, BatchLoad):
            pool = fleet.batch[name]
            rec = pool.record
            waits = np.asarray(rec.waits)
            target = model.load.wait_target
            met = int((waits <= target).sum())
            # Tasks still queued at the end: a miss once they have waited longer than the target.
            overdue = sum(1 for queued in pool.queued_since() if duration_s - queued > target)
            wait_p50, wait_p95 = _qs(waits, 0.5, 0.95)
            out[name] = TierOutcome(
                name, "batch", rec.created, target, met, waits.shape[0] + overdue,
                None, None, None, None, None, wait_p50, wait_p95,
                cost, gpu_hours, meter.peak_ready, meter.interruptions, rec.retries,
                rec.created - pool.accounted(),
            )  # fmt: skip
            continue
        serving = fleet.serving[name]
        srec = serving.record
        ttft = np.concatenate(srec.ttft) if srec.ttft else np.empty(0)
        e2e = np.concatenate(srec.e2e) if srec.e2e else np.empty(0)
        target = model.load.ttft_target
        met = int((ttft <= target).sum())
        # Requests still without a first token at the end count as misses once past the target.
        overdue = int((duration_s - serving.awaiting_first_token() > target).sum())
        # A refused request never had a first token (recorded as inf): a miss, but no TTFT to take quantiles of.
        never = srec.refused or srec.rejected_too_long
        ttft_p50, ttft_p95, ttft_p99 = _qs(ttft[np.isfinite(ttft)] if never else ttft, 0.5, 0.95, 0.99)
        e2e_p50, e2e_p95 = _qs(e2e, 0.5, 0.95)
        out[name] = TierOutcome(
            name, "serving", srec.arrivals, target, met, ttft.shape[0] + overdue,
            ttft_p50, ttft_p95, ttft_p99, e2e_p50, e2e_p95, None, None,
            cost, gpu_hours, meter.peak_ready, meter.interruptions, srec.retries, 0, srec.abandoned, srec.refused,
            srec.rejected_too_long, srec.preemptions,
        )  # fmt: skip
    return out


BASELINES = ("static", "reactive", "skyserve", "oracle", "clairvoyant")
RATIO_ORDER = ("oracle", "clairvoyant", "static", "reactive", "skyserve")  # the table's ÷ columns
RATIO_LABEL = {
    "oracle": "oracle", "clairvoyant": "clairv.", "static": "static", "reactive": "reactive", "skyserve": "SkyServe",
}  # fmt: skip
BOUNDS = ("oracle", "clairvoyant")  # what every run's cost is divided by
RUN_LABEL = {
    "ours": "ours", "static": "static", "reactive": "reactive (KEDA/HPA)", "skyserve": "SkyServe-style",
    "clairvoyant": "clairvoyant",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class BaselineOutcome:
    name: str  # "static", "reactive", "skyserve", "oracle", "clairvoyant"
    cost: float
    gpu_hours: float
    slo_attainment: float | None  # the oracle's: measured on open-loop traffic, else None (sized by a load test)
    peak: int | None = None  # the oracle's most instances at once (its busiest minute); None for the others
    # the clairvoyant's: instance-seconds billed booting and kept through short gaps, instances launched
    boot_s: float | None = None
    kept_s: float | None = None
    launches: int | None = None


@dataclass(frozen=True, slots=True)
class RolloutOutcome:
    """A rolling replacement during the run (the workload's ``rollouts:``): how long it took and what it did
    to the SLO and the bill."""

    tier: str
    started_s: float  # seconds after the start
    finished_s: float | None  # when no drifted instance was left; None: still rolling at the end
    slo_during: float | None  # SLO attainment of the requests that arrived while it rolled
    slo_outside: float | None  # … and of the rest of the run
    instance_hours: float  # what the tier billed while it rolled
    peak_billed: int  # most instances billing at once while it rolled
    billed_before: int  # instances billing when it started


@dataclass(slots=True)
class Report:
    """Our run, per tier and in total, with each baseline's cost and SLO attainment."""

    duration_s: float
    tiers: dict[str, TierOutcome]
    baselines: dict[str, dict[str, BaselineOutcome]] = field(default_factory=dict)  # tier -> name -> outcome
    timelines: dict[str, dict[str, Any]] = field(default_factory=dict)  # tier -> series arrays (for the plot)
    rollouts: list[RolloutOutcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what makes the run's SLO unreachable for any policy
    boots: dict[str, dict[str, Any]] = field(default_factory=dict)  # tier -> the boot model's p50/p95, draws
    # What computes the timelines when a plot first asks (``series``): sorting a day's TTFTs by minute costs
    # seconds that a search's trials, which never plot, need not pay.
    timelines_from: Callable[[], dict[str, dict[str, Any]]] | None = field(default=None, repr=False, compare=False)

    def series(self) -> dict[str, dict[str, Any]]:
        """The per-tier series for the plot, computed on first use."""
        if self.timelines_from is not None:
            self.timelines.update(self.timelines_from())
            self.timelines_from = None
        return self.timelines

    def total(self) -> dict[str, Any]:
        tiers = list(self.tiers.values())
        known = sum(t.slo_known for t in tiers)
        total: dict[str, Any] = {
            "requests": sum(t.requests for t in tiers),
            "slo_attainment": (sum(t.slo_met for t in tiers) / known) if known else None,
            "cost": sum(t.cost for t in tiers),
            "gpu_hours": sum(t.gpu_hours for t in tiers),
            "interruptions": sum(t.interruptions for t in tiers),
            "retries": sum(t.retries for t in tiers),
            "lost_tasks": sum(t.lost_tasks for t in tiers),
            "timed_out": sum(t.timed_out for t in tiers),
            "refused": sum(t.refused for t in tiers),
            "rejected_too_long": sum(t.rejected_too_long for t in tiers),
            "preemptions": sum(t.preemptions for t in tiers),
        }
        for name in BASELINES:
            costs = [b[name].cost for b in self.baselines.values() if name in b]
            if len(costs) == len(self.tiers) and costs:
                total[f"{name}_cost"] = sum(costs)
                total[f"cost_vs_{name}"] = _ratio(total["cost"], sum(costs))
        for name in ("static", "reactive", "skyserve"):  # each driven baseline against the two bounds
            for bound in BOUNDS:
                if f"{name}_cost" in total and f"{bound}_cost" in total:
                    total[f"{name}_cost_vs_{bound}"] = _ratio(total[f"{name}_cost"], total[f"{bound}_cost"])
        return total

    def to_dict(self) -> dict[str, Any]:
        tiers = {}
        for name, outcome in self.tiers.items():
            entry = outcome.to_dict()
            base = self.baselines.get(name, {})
            entry["baselines"] = {k: {**asdict(v), **self._vs_bounds(v.cost, base)} for k, v in base.items()}
            for ref in BASELINES:
                if ref in base:
                    entry[f"cost_vs_{ref}"] = _ratio(outcome.cost, base[ref].cost)
            tiers[name] = entry
        data: dict[str, Any] = {"duration_s": self.duration_s, "tiers": tiers, "total": self.total()}
        if self.rollouts:
            data["rollouts"] = [asdict(r) for r in self.rollouts]
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.boots:
            data["boots"] = {k: dict(v) for k, v in self.boots.items()}
        return data

    @staticmethod
    def _vs_bounds(cost: float, base: Mapping[str, BaselineOutcome]) -> dict[str, float | None]:
        return {f"cost_vs_{ref}": _ratio(cost, base[ref].cost) for ref in BOUNDS if ref in base}

    def bound_warnings(self, maxes: Mapping[str, int]) -> list[str]:
        """A tier whose ``max`` is below what the oracle needs in its busiest minute: there no policy can hold
        the SLO, and the run measures the bound, not the policy (the oracle itself is not bounded)."""
        lines = []
        for name, base in self.baselines.items():
            oracle = base.get("oracle")
            high = maxes.get(name)
            if oracle is None or oracle.peak is None or high is None or oracle.peak <= high:
                continue
            lines.append(
                f"tier {name}: the oracle needs {oracle.peak} instances in its busiest minute, above the tier's "
                f"max of {high}: no policy holds the SLO then; raise `max` to at least {oracle.peak}, or read "
                "the misses as the bound's"
            )
        return lines

    def reach_warnings(self, slo_goal: float) -> list[str]:
        """A tier where even a static fleet at the oracle's busiest-minute size, all day, holds fewer requests
        within the TTFT target than ``slo_goal``: the target is under the requests' own tail (the client
        overhead, a long prompt's prefill), which no fleet size removes, so no policy reaches the SLO."""
        lines = []
        for name, base in self.baselines.items():
            static, oracle = base.get("static"), base.get("oracle")
            if static is None or static.slo_attainment is None or static.slo_attainment >= slo_goal:
                continue
            size = f" of {oracle.peak}" if oracle is not None and oracle.peak is not None else ""
            lines.append(
                f"tier {name}: a static fleet{size} (the oracle's busiest minute) all day held only "
                f"{pct(static.slo_attainment)} of requests within the TTFT target, under the SLO of {pct(slo_goal)}: "
                "the target is below the requests' own tail (client overhead, prefill), which no fleet size "
                f"removes; raise the TTFT target, or read the SLO against {pct(static.slo_attainment)}"
            )
        return lines

    def timeout_lines(self) -> list[str]:
        """One line per serving tier whose clients gave up on requests (the workload's ``client_timeout``, or
        the activator's ``max_wait`` at zero), and one per tier whose activator refused requests at zero."""
        lines = []
        for t in self.tiers.values():
            if t.timed_out:
                lines.append(
                    f"tier {t.tier}: {t.timed_out:,} requests ({_share(t.timed_out, t.requests)}) waited past the "
                    "clients' timeout (or the activator's max_wait, at zero) without a first token and were cut "
                    "(counted as misses)"
                )
            if t.refused:
                lines.append(
                    f"tier {t.tier}: {t.refused:,} requests ({_share(t.refused, t.requests)}) were refused by the "
                    "activator at zero, which already held its activator.max_held (503; counted as misses): a tier "
                    "whose traffic cannot wait out a boot keeps `min: 1` (every held request goes to the first "
                    "instance)"
                )
            if t.rejected_too_long:
                lines.append(
                    f"tier {t.tier}: {t.rejected_too_long:,} requests ({_share(t.rejected_too_long, t.requests)}) "
                    "were refused by vLLM: prompt + output over the tier's max_model_len (HTTP 400; counted as "
                    "misses); raise serving.max_model_len (or context_target) to the traffic's longest context"
                )
        return lines

    def variant_lines(self) -> list[str]:
        """One line per tier with variants: the instance-hours each of its hardware ran."""
        lines = []
        for t in self.tiers.values():
            if t.variants:
                mix = ", ".join(f"{label} {hours:,.1f}" for label, hours in t.variants.items())
                lines.append(f"tier {t.tier}: instance-hours by variant: {mix}")
        return lines

    def rollout_lines(self) -> list[str]:
        """One line per rolling replacement of the run, for the console."""
        lines = []
        for r in self.rollouts:
            minutes = None if r.finished_s is None else (r.finished_s - r.started_s) / 60
            took = "still rolling at the end" if minutes is None else f"done in {minutes:.1f} min"
            lines.append(
                f"rollout {r.tier} at {r.started_s / 3600:.2f} h: {took}; SLO met {pct(r.slo_during)} while "
                f"rolling vs {pct(r.slo_outside)} otherwise; billed {r.instance_hours:.1f} instance-h, "
                f"peak {r.peak_billed} instances (from {r.billed_before})"
            )
        return lines

    def tables(self) -> tuple[Any, Any, Any, Any]:
        """Four rich Tables that each fit 100 columns: our run per tier, the baselines, our cost ÷ theirs,
        and every run's cost ÷ the oracle and ÷ the clairvoyant."""
        from rich import box
        from rich.table import Table

        run = Table(title=f"Simulated {self.duration_s / 3600:g} h", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("tier", "requests", "SLO met", "TTFT p50/95/99", "cost $", "GPU-h", "peak", "interrupts",
                    "lost"):  # fmt: skip
            run.add_column(col, justify="left" if col == "tier" else "right", no_wrap=col == "tier")
        versus = Table(title="Baselines: cost $ (SLO met)", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("tier", "static", "reactive", "SkyServe", "oracle", "clairvoyant"):
            versus.add_column(col, justify="left" if col == "tier" else "right", no_wrap=col == "tier")
        ratios = Table(title="Our cost ÷ each baseline's", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("tier", *(f"÷{RATIO_LABEL[r]}" for r in RATIO_ORDER)):
            ratios.add_column(col, justify="left" if col == "tier" else "right", no_wrap=col == "tier")
        for name, t in self.tiers.items():
            base = self.baselines.get(name, {})
            run.add_row(
                name,
                f"{t.requests:,}",
                pct(t.slo_attainment),
                _ttft(t),
                f"{t.cost:,.2f}",
                f"{t.gpu_hours:,.1f}",
                str(t.peak_instances),
                str(t.interruptions),
                str(t.lost_tasks),
            )
            versus.add_row(
                name,
                _base(base.get("static")),
                _base(base.get("reactive")),
                _base(base.get("skyserve")),
                _base(base.get("oracle")),
                _base(base.get("clairvoyant")),
            )
            ratios.add_row(
                name, *(_fmt_ratio(_ratio(t.cost, base[ref].cost) if ref in base else None) for ref in RATIO_ORDER)
            )
        tot = self.total()
        run.add_row(
            "total", f"{tot['requests']:,}", pct(tot["slo_attainment"]), "", f"{tot['cost']:,.2f}",
            f"{tot['gpu_hours']:,.1f}", "", str(tot["interruptions"]), str(tot["lost_tasks"]),
        )  # fmt: skip
        versus.add_row(
            "total",
            *(f"{tot[f'{ref}_cost']:,.2f}" if f"{ref}_cost" in tot else "-"
              for ref in ("static", "reactive", "skyserve", "oracle", "clairvoyant")),
        )  # fmt: skip
        ratios.add_row("total", *(_fmt_ratio(tot.get(f"cost_vs_{ref}")) for ref in RATIO_ORDER))
        return run, versus, ratios, self.bounds_table()

    def bounds_table(self) -> Any:
        """Every run (ours and each driven baseline), per tier and in total: cost ÷ oracle and ÷ clairvoyant."""
        from rich import box
        from rich.table import Table

        table = Table(title="Each run's cost ÷ the oracle's and ÷ the clairvoyant's", box=box.SIMPLE_HEAD,
                      pad_edge=False)  # fmt: skip
        for col in ("tier", "run", "cost $", "÷oracle", "÷clairvoyant"):
            table.add_column(col, justify="left" if col in ("tier", "run") else "right", no_wrap=True)
        totals: dict[str, float] = {}
        complete = {run: True for run in RUN_LABEL}
        for name, t in self.tiers.items():
            base = self.baselines.get(name, {})
            for run, label in RUN_LABEL.items():
                cost = t.cost if run == "ours" else base[run].cost if run in base else None
                if cost is None:
                    complete[run] = False
                    continue
                totals[run] = totals.get(run, 0.0) + cost
                ratios = self._vs_bounds(cost, base)
                table.add_row(name, label, f"{cost:,.2f}", *(_fmt_ratio(ratios.get(f"cost_vs_{b}")) for b in BOUNDS))
        tot = self.total()
        for run, label in RUN_LABEL.items():
            if not complete[run] or run not in totals:
                continue
            cells = (_fmt_ratio(_ratio(totals[run], tot[f"{b}_cost"]) if f"{b}_cost" in tot else None) for b in BOUNDS)
            table.add_row("total", label, f"{totals[run]:,.2f}", *cells)
        return table


def timelines(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """Per-tier series for the plot: arrivals per minute, ready instances, TTFT p95 per minute or queue, and
    for serving tiers the requests judged and missed each minute."""
    out: dict[str, dict[str, Any]] = {}
    for name in fleet.models:
        pool = fleet.serving.get(name) or fleet.batch[name]
        rows = np.asarray(pool.record.timeline, dtype=np.float64).reshape(-1, 5)
        if not rows.shape[0]:
            continue
        t = rows[:, 0]
        minute = np.floor((t - 1e-9) / 60.0).astype(np.int64)
        per_minute = np.bincount(minute, weights=rows[:, 1])  # arrivals per minute, plotted at each tick
        series: dict[str, Any] = {"t": t, "load": per_minute[minute], "ready": rows[:, 2], "running": rows[:, 3],
                                  "queue": rows[:, 4]}  # fmt: skip
        meter = fleet.meters[name]
        if meter.billed_timeline:
            billed = np.asarray(meter.billed_timeline, dtype=np.float64)
            series["billed"] = np.interp(t, billed[:, 0], billed[:, 1])
        if name in fleet.serving:
            rec = fleet.serving[name].record
            at = np.concatenate(rec.ttft_at) if rec.ttft_at else np.empty(0)
            values = np.concatenate(rec.ttft) if rec.ttft else np.empty(0)
            minute = np.floor(at / 60.0).astype(np.int64)
            order = np.argsort(minute, kind="stable")
            minute, values = minute[order], values[order]
            keys, starts = np.unique(minute, return_index=True)
            bounds = np.append(starts, minute.shape[0])
            p95 = np.array([np.quantile(values[a:b], 0.95) for a, b in itertools.pairwise(bounds.tolist())])
            series["t_q"] = keys * 60.0 + 30.0
            series["ttft_p95"] = p95
            # Requests judged and missed (TTFT over the target) each minute: where the SLO was lost.
            series["judged"] = np.diff(bounds).astype(np.float64)
            load = fleet.models[name].load
            assert not isinstance(load, BatchLoad)  # a serving pool serves a serving load
            over = (values > load.ttft_target).astype(np.float64)
            series["missed"] = np.add.reduceat(over, starts) if starts.shape[0] else np.empty(0)
        out[name] = series
    return out


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def pct(x: float | None) -> str:
    """A share as a percentage with two decimals; "-" when unknown."""
    return "-" if x is None else f"{100 * x:.2f}%"


def _fmt_ratio(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.2f}×"


def _ttft(t: TierOutcome) -> str:
    if t.kind == "batch":
        return "-" if t.wait_p95_s is None else f"wait p95 {t.wait_p95_s:.0f}s"
    if t.ttft_p50_s is None:
        return "-"
    return f"{t.ttft_p50_s * 1e3:.0f}/{(t.ttft_p95_s or 0) * 1e3:.0f}/{(t.ttft_p99_s or 0) * 1e3:.0f} ms"


def _base(b: BaselineOutcome | None) -> str:
    if b is None:
        return "-"
    slo = "" if b.slo_attainment is None else f" ({100 * b.slo_attainment:.1f}%)"
    return f"{b.cost:,.2f}{slo}"


def build_report(
    fleet: Fleet, duration_s: float, baselines: Mapping[str, Mapping[str, BaselineOutcome]] | None = None
) -> Report:
    return Report(
        duration_s=duration_s,
        tiers=outcomes(fleet, duration_s),
        baselines={k: dict(v) for k, v in (baselines or {}).items()},
        timelines_from=functools.partial(timelines, fleet),
    )
