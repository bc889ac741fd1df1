"""A simulated day through the real controller: policies, reconciler and store on virtual time.

Each tick of ``tick_s`` virtual seconds: the cloud's scheduled events land (capacity windows, spot
notices), the reconciler runs one real ``tick()`` (it reads the fleet model's signals, decides with the
tier's policy, launches and retires instances on the simulated cloud, and records decisions and events
in an in-memory SQLite store), then the instances' states in the store become the fleet model's ready
and draining sets, and the fleet model serves the tick's traffic. No decision logic lives here.

Before the workload starts, the controller runs a warm-up that is not in the report (neither its cost nor
its requests). With ``warmup: steady`` (the default) it serves the workload's opening traffic for the
longest boot the run can draw and 15 minutes (``workloads/opening.py``), so each tier opens sized for it,
with its signals and its policy's state primed, as a fleet that has been running would; the baselines
run the same warm-up. With ``warmup: cold`` it runs the longest boot the run can draw and two ticks with no
traffic, so each tier opens at what its policy holds at idle, and the baselines open at their floors.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import multiprocessing
import os
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.decide import bounds_for
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.reconciler.pool import RESUME_FAILED, RESUME_TIMEOUT, RESUMING
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.live_rows import write_pattern
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.domain.instance import Instance, InstanceState
from scalectl.policies.external import ExternalPolicyError, load_external_policy
from scalectl.policies.spec import ExternalPolicy
from scalectl.simulator.baselines import (
    DEFAULT_SLO_GOAL,
    Baselines,
    BaselineSettings,
    baseline_parts,
    merge_parts,
    part_label,
    run_baselines,
)
from scalectl.simulator.boots import BootInputError, Boots, boot_summary, timeout_warnings
from scalectl.simulator.cloud_events import CloudEvents
from scalectl.simulator.context_limit import context_warnings
from scalectl.simulator.fleet import Fleet, TierModel, hardware_label, tier_models
from scalectl.simulator.fleet_signals import FleetSignals, activated_tiers
from scalectl.simulator.report import Report, build_report
from scalectl.simulator.rollouts import RolloutClock, rollout_outcomes
from scalectl.simulator.sim_cloud import simulation_cloud
from scalectl.simulator.worker_process import exit_with_parent
from scalectl.simulator.workloads.opening import steady_warmup_s
from scalectl.simulator.workloads.spec import Workload
from scalectl.tiers.config import FleetConfig, TierSpec

Progress = Callable[[float, float], None]  # (virtual seconds done, total)
# Once the controller's run is done: the baselines still running in their processes, each time one finishes
# (an empty list at the end). A baseline that falls behind its traffic can take far longer than the run.
BaselineWait = Callable[[list[str]], None]


class SimulationInputError(ValueError):
    """The tiers file and the workload do not fit together; the message names the file, tier and field."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    tick_s: float = 5.0  # the daemon's tick interval (settings.tick_interval)
    baselines: bool = True
    parallel_baselines: bool = True  # run the baselines in a second process while the controller runs
    progress_every_s: float = 600.0  # virtual seconds between progress callbacks
    slo_goal: float = DEFAULT_SLO_GOAL  # the oracle holds this share of requests within the TTFT target
    # Asked every ``check_every_s`` virtual seconds how the run stands; a reason stops it (RunStopped). For a
    # search that knows a run can no longer win: ``scalectl tune`` stops a trial past the best one's cost.
    stop: Callable[[Checkpoint], str | None] | None = None
    check_every_s: float = 1800.0


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A run so far: virtual seconds since the start, and per tier the dollars billed and (met, judged)."""

    t: float
    cost: Mapping[str, float]
    slo: Mapping[str, tuple[int, int]]


class RunStopped(Exception):
    """``RunOptions.stop`` gave a reason: the run ended at ``checkpoint.t``."""

    def __init__(self, reason: str, checkpoint: Checkpoint) -> None:
        super().__init__(reason)
        self.reason, self.checkpoint = reason, checkpoint


@dataclass(slots=True)
class SimulationResult:
    report: Report
    ticks: int
    decisions: int  # decision rows the reconciler recorded (changes, and one a minute per tier)
    events: dict[str, int]  # event kind -> count (launched, ready, draining, retired, interrupted, ...)
    billed: float  # dollars the simulated clouds billed within the run (the report's total cost)
    billed_with_warmup: float  # including the warm-up before the workload starts
    interruptions_scheduled: int
    store: Store | None = None  # the run's in-memory store: decisions, events and instance rows to inspect


def models_for(config: FleetConfig, workload: Workload, workload_source: str = "workload") -> dict[str, TierModel]:
    """Pair workload tiers with their configuration; every problem names the workload file and tier."""
    missing = [name for name in workload.tiers if name not in config.tiers]
    if missing:
        known = ", ".join(config.tiers)
        raise SimulationInputError(
            "\n".join(
                f'{workload_source}: tier "{name}": not in the tiers file (its tiers: {known}); '
                "rename it or add the tier to the tiers file"
                for name in missing
            )
        )
    problems = []
    for name in workload.tiers:
        tier = config.tiers[name]
        if isinstance(tier.policy, ExternalPolicy):  # fail before the run, not as a "hold" on every tick
            try:
                load_external_policy(tier.policy.class_, tier.policy.options, bounds_for(tier))
            except ExternalPolicyError as exc:
                problems.append(f'tiers file: tier "{name}": {exc}')
        try:
            one: dict[str, Any] = {name: tier}  # TierSpec fits the fleet's TierLike protocol (read-only fields)
            tier_models(workload.model_copy(update={"tiers": {name: workload.tiers[name]}}), one)
        except (ValueError, KeyError) as exc:
            problems.append(f'{workload_source}: tier "{name}": {exc}')
    if problems:
        raise SimulationInputError("\n".join(problems))
    tiers: dict[str, Any] = {name: config.tiers[name] for name in workload.tiers}
    return tier_models(workload, tiers)


def simulate(
    config: FleetConfig,
    config_text: str,
    workload: Workload,
    *,
    options: RunOptions | None = None,
    progress: Progress | None = None,
    workload_source: str = "workload",
    waiting: BaselineWait | None = None,
) -> SimulationResult:
    """Run the workload through the controller (and the baselines), return the report."""
    opts = options or RunOptions()
    models = models_for(config, workload, workload_source)
    before = context_warnings(workload, models, {name: config.tiers[name] for name in workload.tiers})
    subset = FleetConfig(tiers={n: config.tiers[n] for n in workload.tiers}, providers=config.providers)
    try:
        boots = Boots.of(config, list(workload.tiers), workload.cloud)
    except BootInputError as exc:
        raise SimulationInputError(f"tiers file: {exc}") from None
    settings = BaselineSettings(
        boots=boots.tiers(),
        warmup_boot_s=boots.longest_s(),
        tick_s=opts.tick_s,
        slo_goal=opts.slo_goal,
        bounds={name: (config.tiers[name].min, config.tiers[name].max) for name in workload.tiers},
        drain_timeout_s={name: config.tiers[name].drain_timeout for name in workload.tiers},
    )
    pending: list[concurrent.futures.Future[Baselines]] | None = None
    pool: concurrent.futures.ProcessPoolExecutor | None = None
    parts = baseline_parts(workload, models, settings) if opts.baselines else []
    labels = [part_label(part) for part in parts]
    if parts and opts.parallel_baselines:
        workers = max(1, min(len(parts), os.cpu_count() or 1))
        try:  # fork before any thread or event loop exists in this process
            pool = concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("fork"), initializer=exit_with_parent,
                initargs=(os.getpid(),),
            )  # fmt: skip
            pending = [pool.submit(job, *args) for job, args in parts]  # the longest first: oracle, KEDA/HPA
        except (OSError, ValueError):
            pool, pending = None, None
    try:
        result = asyncio.run(_Run(subset, config_text, workload, models, opts, progress, boots).run())
        baselines: Baselines = {}
        if pending is not None:
            try:
                if waiting is not None:
                    _tell_waiting(waiting, dict(zip(pending, labels, strict=True)))
                baselines = merge_parts(models, [future.result() for future in pending])
            except concurrent.futures.process.BrokenProcessPool:
                pending = None
        if parts and pending is None:
            if waiting is not None:  # one after another, in this process
                waiting(labels)
            baselines = run_baselines(workload, models, settings)
            if waiting is not None:
                waiting([])
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    result.report.baselines = {k: dict(v) for k, v in baselines.items()}
    result.report.boots = boot_summary(boots, workload.tiers)
    maxes = {name: config.tiers[name].max for name in workload.tiers}
    result.report.warnings = before + result.report.bound_warnings(maxes)
    result.report.warnings += result.report.reach_warnings(opts.slo_goal)
    result.report.warnings += timeout_warnings(boots, config, workload.tiers)
    return result


def _tell_waiting(waiting: BaselineWait, labels: Mapping[concurrent.futures.Future[Baselines], str]) -> None:
    """Say which baselines are still running (``labels``: each one's future), again each time one finishes,
    until none is."""
    left = [future for future in labels if not future.done()]
    waiting([labels[future] for future in left])
    for finished in concurrent.futures.as_completed(left):
        left.remove(finished)
        waiting([labels[future] for future in left])


INSTANCES_TABLE = "instances"


class TableWrites:
    """Whether a table was written since the last ``take()``: an engine event sees every INSERT, UPDATE and
    DELETE statement the store runs, whichever session or repository function issues it."""

    def __init__(self, engine: Engine, table: str) -> None:
        self._pattern = write_pattern(table)
        self._written = True  # nothing read yet
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if not self._written and self._pattern.match(statement):
            self._written = True

    def take(self) -> bool:
        written, self._written = self._written, False
        return written


def boot_paths(events: Sequence[Any], start: float) -> dict[str, dict[str, int]]:
    """Per tier, the boots within the report (from ``start``): ``cold`` creates launched, ``warm`` starts of
    warm pool members that were not refused or timed out, ``resume_failed`` those that were."""
    kinds: dict[str, Counter[str]] = {}
    for e in events:
        if e.t >= start and e.tier is not None:
            kinds.setdefault(e.tier, Counter())[e.kind] += 1
    out = {}
    for tier, count in kinds.items():
        failed = count[RESUME_FAILED] + count[RESUME_TIMEOUT]
        out[tier] = {"warm": max(0, count[RESUMING] - failed), "cold": count["launched"], "resume_failed": failed}
    return out


def variant_hours(
    rows: Sequence[Any], start: float, duration: float, tiers: set[str]
) -> dict[str, dict[tuple[str, int], float]]:
    """Per tier with variants, the instance-hours each (GPU, count) ran within the report (from launch to
    end, as the cloud bills a machine)."""
    out: dict[str, dict[tuple[str, int], float]] = {}
    for row in rows:
        if row.tier not in tiers or row.provider_id is None:
            continue
        begun = row.launched_at if row.launched_at is not None else row.created_at
        ended = row.ended_at if row.ended_at is not None else start + duration
        seconds = min(ended, start + duration) - max(begun, start)
        if seconds > 0:
            mine = out.setdefault(row.tier, {})
            mine[(row.gpu, row.gpu_count)] = mine.get((row.gpu, row.gpu_count), 0.0) + seconds / 3600.0
    return out


class _Run:
    def __init__(
        self,
        config: FleetConfig,
        config_text: str,
        workload: Workload,
        models: Mapping[str, TierModel],
        opts: RunOptions,
        progress: Progress | None,
        boots: Boots,
    ) -> None:
        self.workload = workload
        self.opts = opts
        self.progress = progress
        self.start = workload.start_epoch
        self.steady = steady_warmup_s(workload, opts.tick_s, boots.longest_s())  # 0: a cold start
        self.warmup = self.steady or boots.longest_s() + 2 * opts.tick_s
        self.clock = FakeClock(self.start - self.warmup)
        self.fleet = Fleet(workload, models, warmup_s=self.steady)
        names = sorted({p for tier in config.tiers.values() for p in tier.providers})
        self.clouds = {
            n: simulation_cloud(
                n, self.clock, workload.cloud, workload.seed, boots.for_cloud(n), boots.resume_for_cloud(n)
            )
            for n in names
        }
        self.events = CloudEvents(workload.cloud, self.clouds, workload.seed)
        engine = make_engine("sqlite://")
        Base.metadata.create_all(engine)
        self.store = Store(engine, sole_writer=True)  # a private database: nobody else writes to it
        self.store.config.apply(config, config_text, "simulate", self.clock.now())
        self.reconciler = Reconciler(
            self.store,
            self.clouds,
            FleetSignals(self.fleet, self.clock, activated_tiers(config)),
            self.clock,
            drain_check=self._drain_check,
            readiness=self._serving,
        )
        self.members: dict[str, tuple[frozenset[str], frozenset[str]]] = {n: (frozenset(), frozenset()) for n in models}
        self.billing: dict[str, int] = dict.fromkeys(models, 0)
        self.writes = TableWrites(engine, INSTANCES_TABLE)
        self.tier_of: dict[str, str] = {}
        self.rollouts = RolloutClock(workload.rollouts)
        self.mixed = {name for name, model in models.items() if model.variants}  # tiers with variants

    async def _serving(self, _tier: TierSpec, row: Instance) -> tuple[bool, str]:
        """The readiness probe: whether the instance's server answers yet (its drawn boot is over)."""
        cloud = self.clouds.get(row.provider)
        if cloud is None or row.provider_id is None or not cloud.serving(row.provider_id):
            return False, "server starting"
        return True, "server answers"

    async def _drain_check(self, row: Instance) -> float | None:
        """What vLLM (or the Celery worker) on a draining instance still runs: the reconciler deletes it at 0."""
        if row.tier not in self.fleet.models or row.provider_id is None:
            return None
        return float(self.fleet.work_on(row.tier, row.provider_id))

    async def run(self) -> SimulationResult:
        tick, duration = self.opts.tick_s, self.workload.duration
        t, ticks = -self.warmup, 0
        billed_at_start: float | None = None
        next_progress = next_check = 0.0
        while t < duration - 1e-9:
            if t >= 0 and billed_at_start is None:
                self.clock.set(self.start)
                billed_at_start = self._billed()
                self.fleet.open_report(0.0)
            self.clock.set(self.start + t)
            self.events.apply(t)
            self.rollouts.start_due(self.store, t, self.start + t)
            await self.reconciler.tick()
            self.rollouts.finish_done(self.store, t)
            ticks += 1
            billed = self._sync_fleet(t if self.steady else max(t, 0.0))
            if t < 0 and self.steady:  # the opening traffic: served, not reported
                self.fleet.advance(t, min(t + tick, 0.0))
            if t >= 0:
                t1 = min(t + tick, duration)
                for name, count in billed.items():
                    self.fleet.bill(name, t, t1, count)
                self.fleet.advance(t, t1)
                if self.progress is not None and t1 >= next_progress:
                    self.progress(t1, duration)
                    next_progress = t1 + self.opts.progress_every_s
                if self.opts.stop is not None and t1 >= next_check:
                    self._check(t1)
                    next_check = t1 + self.opts.check_every_s
            t = round(t + tick, 6)
        self.clock.set(self.start + duration)
        billed_end = self._billed()
        return self._result(ticks, billed_end - (billed_at_start or 0.0), billed_end)

    def _sync_fleet(self, now: float) -> dict[str, int]:
        """The store's view of the instances becomes the fleet model's; returns instances billing per tier.

        Only after a tick that wrote to the instances: the view cannot have changed otherwise, and most ticks
        change nothing (reading every tick cost as much as the fleet model's own work on a batch night)."""
        if not self.writes.take():
            return self.billing
        ready: dict[str, set[str]] = {n: set() for n in self.members}
        draining: dict[str, set[str]] = {n: set() for n in self.members}
        billing: dict[str, int] = dict.fromkeys(self.members, 0)
        with self.store.unit_of_work() as uow:
            rows = uow.instances.live()
        # Creation order (simulated ids count up): spot preemption times are drawn in the order instances appear.
        for row in sorted(rows, key=lambda r: (r.provider, r.provider_id or "")):
            tier, provider_id = row.tier, row.provider_id
            if provider_id is None or tier not in self.members:
                continue
            if row.state is not InstanceState.STOPPED:  # a stopped machine holds no GPU
                billing[tier] += 1
            if tier in self.mixed:
                self.fleet.place(tier, provider_id, row.gpu, row.gpu_count)
            launched_at = row.launched_at if row.launched_at is not None else row.created_at
            self.events.watch(row.provider, provider_id, row.capacity, launched_at - self.start)
            if row.state is InstanceState.READY:
                ready[tier].add(provider_id)
            elif row.state is InstanceState.DRAINING and row.ready_at is not None:
                draining[tier].add(provider_id)
        for name, (was_ready, was_draining) in self.members.items():
            now_ready, now_draining = frozenset(ready[name]), frozenset(draining[name])
            if (now_ready, now_draining) == (was_ready, was_draining):
                continue
            gone = (was_ready | was_draining) - now_ready - now_draining
            # Deleted with work still on it (preempted, noticed, or past the drain timeout): that work is
            # cut and retried elsewhere. Drained to zero: nothing to do.
            cut = sorted(i for i in gone if self.fleet.work_on(name, i) > 0)
            if cut:
                self.fleet.interrupt(name, cut, now)
            self.fleet.set_instances(name, sorted(now_ready), sorted(now_draining), now)
            self.members[name] = (now_ready, now_draining)
        self.billing = billing
        return billing

    def _billed_by_tier(self, until: float) -> dict[str, tuple[float, float]]:
        """Per tier, (dollars, instance-seconds) every cloud billed from the start until ``until`` s later."""
        per_tier: dict[str, tuple[float, float]] = {}
        for cloud in self.clouds.values():
            for name, (dollars, seconds) in cloud.billed_by_tier(self.start, self.start + until).items():
                spent, billed = per_tier.get(name, (0.0, 0.0))
                per_tier[name] = (spent + dollars, billed + seconds)
        return per_tier

    def _storage_by_tier(self, until: float) -> dict[str, float]:
        """Per tier, dollars stopped machines' disks billed from the start until ``until`` s later."""
        out: dict[str, float] = {}
        for cloud in self.clouds.values():
            for name, dollars in cloud.storage_by_tier(self.start, self.start + until).items():
                out[name] = out.get(name, 0.0) + dollars
        return out

    def _check(self, t: float) -> None:
        assert self.opts.stop is not None
        billed = self._billed_by_tier(t)
        cost = {name: billed.get(name, (0.0, 0.0))[0] for name in self.fleet.models}
        checkpoint = Checkpoint(t, cost, {name: self.fleet.slo_so_far(name) for name in self.fleet.models})
        reason = self.opts.stop(checkpoint)
        if reason is not None:
            raise RunStopped(reason, checkpoint)

    def _billed(self) -> float:
        return sum(cloud.billed() for cloud in self.clouds.values())

    def _result(self, ticks: int, billed: float, billed_total: float) -> SimulationResult:
        self.store.policy.write_deferred()  # the run's store holds each tier's last policy state
        report = build_report(self.fleet, self.workload.duration)
        report.rollouts = rollout_outcomes(self.fleet, self.rollouts.spans(), self.workload.duration)
        per_tier = self._billed_by_tier(self.workload.duration)
        everything = sys.maxsize  # the whole run: counts, not a page
        rows = self.store.reads.instances(include_ended=True, limit=everything)
        interrupted = Counter(r.tier for r in rows if r.interrupted)
        decisions = len(self.store.records.decisions(limit=everything))
        every_event = self.store.records.events(limit=everything)
        events = Counter(e.kind for e in every_event)
        storage = self._storage_by_tier(self.workload.duration)
        boots = boot_paths(every_event, self.start)
        mix = variant_hours(rows, self.start, self.workload.duration, self.mixed)
        for name, outcome in list(report.tiers.items()):
            dollars, seconds = per_tier.get(name, (0.0, 0.0))
            gpu_hours = seconds * self.fleet.models[name].gpu_count / 3600.0
            if name in mix:  # a mixed fleet's GPUs, machine by machine
                gpu_hours = sum(hours * count for (_, count), hours in mix[name].items())
            report.tiers[name] = dataclasses.replace(
                outcome,
                cost=dollars,
                gpu_hours=gpu_hours,
                variants={hardware_label(gpu, count): round(h, 3) for (gpu, count), h in mix.get(name, {}).items()},
                interruptions=int(interrupted.get(name, 0)),
                pool_storage_cost=storage.get(name, 0.0),
                boots=boots.get(name, {"warm": 0, "cold": 0, "resume_failed": 0}),
            )
        return SimulationResult(
            report=report,
            ticks=ticks,
            decisions=decisions,
            events={str(k): int(v) for k, v in events.items()},
            billed=billed,
            billed_with_warmup=billed_total,
            interruptions_scheduled=self.events.interruptions_scheduled,
            store=self.store,
        )
