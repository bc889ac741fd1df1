"""What the same workload costs without our controller, on the same fleet model.

* static: the peak need, provisioned all day (what teams do when they fear cold starts);
* reactive: KEDA + HPA as a user configures them (``scalectl.simulator.baseline_policies.Hpa``): the target per replica
  comes from ``scalectl plan`` (the concurrent sequences one server holds), the metric is vLLM's running
  requests (not the unbounded waiting queue), HPA's algorithm with its 10% tolerance every 15 s, 300 s
  scale-down stabilisation, bounded by the tier's min and max; new instances take the same provisioning
  delay as ours;
* skyserve: SkyServe's request-rate autoscaler (``scalectl.simulator.baseline_policies.SkyServe``) with its default
  delays, its target qps per replica from a one-replica load test (the rate one instance serves at TTFT p95
  within the target); serving tiers only;
* every baseline's retired instances drain as ours do: billed until what they run ends, at most the tier's
  ``drain_timeout`` (long batch tasks make that a real cost);
* oracle: a lower bound on cost — every minute the fewest instances at which the SLO the report scores holds
  (``slo_goal`` of requests with TTFT within the target) for that minute's load, with no provisioning delay
  and perfect packing (batch: task-seconds / concurrency); open-loop traffic is measured minute by minute
  on the fleet model (``scalectl.simulator.measured_oracle``), closed-loop sessions over one instance's capacity;
* clairvoyant: the oracle's fleet launched a boot ahead, paying every boot it needs (the honest limit of
  any online policy; ``scalectl.simulator.clairvoyant``).

Every driven baseline's new instances take the tier's mean boot (``BaselineSettings.boots``: the run's boot
model, or the midpoint of the workload's ``provision_delay``).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scalectl.policies.types import Signals
from scalectl.simulator.baseline_policies import Hpa, HpaTier, SkyServe, SkyServeTier
from scalectl.simulator.boots import TierBoot
from scalectl.simulator.capacity import capacity_for
from scalectl.simulator.clairvoyant import clairvoyant_plan
from scalectl.simulator.fleet import Fleet, TierModel
from scalectl.simulator.measured_oracle import MinuteOutcome, measured_need
from scalectl.simulator.report import BaselineOutcome, outcomes
from scalectl.simulator.workloads.opening import steady_warmup_s
from scalectl.simulator.workloads.shapes import evaluate
from scalectl.simulator.workloads.sources import BatchTasks, PoissonSource, TraceSource
from scalectl.simulator.workloads.spec import BatchLoad, PoissonLoad, SessionsLoad, TraceLoad, Workload
from scalectl.sizing.plan import make_plan
from scalectl.tiers.config import TierSpec

DEFAULT_PROVISIONING_DELAY_S = 180.0
DEFAULT_DRAIN_TIMEOUT_S = float(TierSpec.model_fields["drain_timeout"].default)  # where the settings carry none
DEFAULT_SLO_GOAL = 0.995  # share of requests with TTFT within the target that the oracle holds
NEED_STEP_S = 60.0  # the oracle re-decides every minute
BURST_WINDOW_S = 10.0  # the rate sizing that starts the oracle's search: each minute's busiest 10 seconds


@dataclass(frozen=True, slots=True)
class BaselineSettings:
    provisioning_delay_s: float = DEFAULT_PROVISIONING_DELAY_S
    poll_s: float = 15.0  # HPA sync period (KEDA serves the metric on each sync)
    stabilization_s: float = 300.0  # HPA scaleDown stabilizationWindowSeconds
    tolerance: float = 0.1  # HPA: no change while metric / (target × replicas) is within ±10%
    target_utilisation: float = 0.8  # KEDA threshold: this share of the sequences `scalectl plan` gives a server
    skyserve_decision_s: float = 20.0
    skyserve_upscale_delay_s: float = 300.0
    skyserve_downscale_delay_s: float = 1200.0
    slo_goal: float = DEFAULT_SLO_GOAL
    tick_s: float = 5.0
    max_instances: int = 1000
    bounds: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # tier -> (min, max) from the tiers file
    # tier -> drain_timeout from the tiers file: a retired instance is billed until what it runs ends, at most
    # this long (the reconciler's drain); the tiers file's default where a tier has none here
    drain_timeout_s: Mapping[str, float] = field(default_factory=dict)
    # tier -> its boot (the run's boot model at its first provider); ``provisioning_delay_s``, fixed, elsewhere
    boots: Mapping[str, TierBoot] = field(default_factory=dict)
    warmup_boot_s: float | None = None  # the longest boot any instance of the run can draw (every provider)

    def boot_of(self, tier: str) -> TierBoot:
        found = self.boots.get(tier)
        if found is not None:
            return found
        return TierBoot(None, (self.provisioning_delay_s, self.provisioning_delay_s))

    def longest_boot_s(self) -> float:
        """The longest boot of the run (the steady warm-up's length, the controller's own when it set it)."""
        if self.warmup_boot_s is not None:
            return self.warmup_boot_s
        return max((boot.longest_s() for boot in self.boots.values()), default=self.provisioning_delay_s)

    def delay_of(self, tier: str) -> float:
        """A driven baseline's provisioning delay for the tier: its mean boot."""
        return self.boot_of(tier).mean_s()

    def bounds_of(self, tier: str, floor: int) -> tuple[int, int]:
        low, high = self.bounds.get(tier, (0, self.max_instances))
        return max(low, floor), max(high, max(low, floor))


# ---- need over time (oracle and static) ------------------------------------------------------------------
def need_timeline(
    workload: Workload, model: TierModel, slo_goal: float = DEFAULT_SLO_GOAL
) -> tuple[np.ndarray, np.ndarray]:
    """Minute grid and the fewest instances at which ``slo_goal`` of each minute's requests meet the target."""
    grid, need, _ = _timeline(workload, model, slo_goal)
    return grid, need


def _timeline(
    workload: Workload, model: TierModel, slo_goal: float
) -> tuple[np.ndarray, np.ndarray, MinuteOutcome | None]:
    """``need_timeline``, and for open-loop traffic what that fleet met over the run (measured, not assumed)."""
    grid = np.arange(0.0, workload.duration, NEED_STEP_S)
    load = model.load
    if isinstance(load, BatchLoad):
        t, run = BatchTasks(model.name, load, workload).all_tasks(workload.duration)
        # Tasks running at each minute if every task started the moment it was queued.
        starts = np.searchsorted(t, grid + NEED_STEP_S)
        ends = np.searchsorted(np.sort(t + run), grid)
        return grid, np.ceil((starts - ends) / load.concurrency), None
    assert model.profile is not None
    if isinstance(load, SessionsLoad):  # closed loop: sessions over what one instance holds at the SLO
        cap = capacity_for(model.profile, load, workload, quantile=slo_goal)
        if cap.per_instance <= 0:
            raise ValueError(f"tier {model.name!r}: one instance cannot meet the TTFT target even at the lightest load")
        active = np.rint(load.sessions * evaluate(load.shape, grid, workload.start_epoch))
        return grid, np.ceil(active / cap.per_instance), None
    source: PoissonSource | TraceSource
    source = TraceSource(model.name, load, workload, model.profile) if isinstance(load, TraceLoad) else (
        PoissonSource(model.name, load, workload, model.profile))  # fmt: skip
    assert isinstance(load, PoissonLoad | TraceLoad)
    # Open-loop traffic is measured on the fleet model (simulator/measured_oracle.py). A rate sizing starts
    # each minute's search: its busiest 10 s over what one instance holds at the SLO under Poisson load. It
    # can be off by a large factor: a trace's bursts last under a second (sized this way, the Azure traces
    # replayed at 88-90%), and near what client overhead allows the load test finds almost no capacity
    # (a 400 ms target: 9x what a fleet needs). But it rises and falls with the load.
    per_instance = capacity_for(model.profile, load, workload, quantile=slo_goal).per_instance
    times = source.arrival_times(0.0, workload.duration)
    per_step = round(NEED_STEP_S / BURST_WINDOW_S)
    counts = np.bincount(np.floor(times / BURST_WINDOW_S).astype(np.int64), minlength=grid.shape[0] * per_step)
    busiest = counts[: grid.shape[0] * per_step].reshape(grid.shape[0], per_step).max(axis=1) / BURST_WINDOW_S
    guess = busiest / per_instance if per_instance > 0 else busiest
    need, outcome = measured_need(model.profile, source, load.ttft_target, grid, workload.duration, guess, slo_goal)
    return grid, need, outcome


Timeline = tuple[np.ndarray, np.ndarray, MinuteOutcome | None]


def oracle(workload: Workload, model: TierModel, slo_goal: float = DEFAULT_SLO_GOAL) -> BaselineOutcome:
    timeline = None if isinstance(model.load, BatchLoad) else _timeline(workload, model, slo_goal)
    return _oracle(workload, model, timeline)


def _oracle(workload: Workload, model: TierModel, timeline: Timeline | None) -> BaselineOutcome:
    """The oracle from a serving tier's need timeline (``_timeline``); batch tiers need none."""
    if isinstance(model.load, BatchLoad):  # pays each task's run time, no more: a fractional worker, no peak
        _, run = BatchTasks(model.name, model.load, workload).all_tasks(workload.duration)
        hours = float(run.sum()) / model.load.concurrency / 3600.0
        return BaselineOutcome("oracle", hours * model.price_per_hour, hours * model.gpu_count, None)
    assert timeline is not None
    _, need, measured = timeline
    hours = float(need.sum()) * NEED_STEP_S / 3600.0
    peak = int(need.max()) if need.shape[0] else 0
    # Measured on open-loop traffic: below the goal where some minutes no fleet size holds (the requests'
    # own tail); closed-loop sessions are sized by a load test, so their oracle's SLO is not measured.
    slo = measured.share() if measured is not None and measured.judged else None
    return BaselineOutcome("oracle", hours * model.price_per_hour, hours * model.gpu_count, slo, peak)


def clairvoyant(
    found: BaselineOutcome, need: np.ndarray, model: TierModel, boot: TierBoot, seed: int
) -> BaselineOutcome:
    """The oracle's fleet (``found``, sized by ``need``), each instance launched its boot ahead: the oracle's
    cost plus every boot (and every gap kept running rather than booted again) at the tier's price. Boots
    are drawn from the tier's boot model, one seeded stream per tier."""
    rng = random.Random(f"{seed}:{model.name}:clairvoyant")
    plan = clairvoyant_plan(need, NEED_STEP_S, lambda: boot.draw_s(rng))
    hours = plan.extra_s / 3600.0
    return BaselineOutcome(
        "clairvoyant",
        found.cost + hours * model.price_per_hour,
        found.gpu_hours + hours * model.gpu_count,
        found.slo_attainment,  # its ready fleet is never below the oracle's
        int(plan.ready.max(initial=0)),
        boot_s=plan.boot_s,
        kept_s=plan.kept_s,
        launches=plan.launches,
    )


def static_count(workload: Workload, model: TierModel, slo_goal: float = DEFAULT_SLO_GOAL) -> int:
    _, need = need_timeline(workload, model, slo_goal)
    return max(1, int(need.max()) if need.shape[0] else 1)


# ---- running a baseline through the fleet model ----------------------------------------------------------
Decide = Callable[[str, float, Signals, int], int]


def run_counts(
    workload: Workload,
    models: Mapping[str, TierModel],
    decide: Decide,
    settings: BaselineSettings,
    *,
    poll_s: float,
    initial: Mapping[str, int],
    delay_s: float | Mapping[str, float],
) -> Fleet:
    """Drive the fleet with ``decide(tier, now, signals, current) -> desired`` every ``poll_s``, from
    ``initial`` instances per tier; a new instance is ready ``delay_s`` later (one figure, or one per tier).
    A steady start (``warmup: steady``) begins as the controller's does, serving the opening traffic before
    t = 0, not reported."""
    delays = delay_s if isinstance(delay_s, Mapping) else dict.fromkeys(models, delay_s)
    warmup = steady_warmup_s(workload, settings.tick_s, settings.longest_boot_s())
    fleet = Fleet(workload, models, warmup_s=warmup)
    ready: dict[str, list[str]] = {}
    pending: dict[str, deque[tuple[float, str]]] = {name: deque() for name in models}
    # retired instances still finishing their work: billed (as the reconciler's drain bills them) until it
    # ends or the tier's drain timeout passes; instance -> when its drain began
    draining: dict[str, dict[str, float]] = {name: {} for name in models}
    counter = 0
    for name in models:
        ready[name] = [f"{name}-{i}" for i in range(initial.get(name, 0))]
        counter += len(ready[name])
        fleet.set_instances(name, ready[name], (), -warmup)
    t, tick, next_poll = -warmup, settings.tick_s, -warmup
    reporting = warmup == 0
    while t < workload.duration - 1e-9:
        if not reporting and t >= -1e-9:
            fleet.open_report(0.0)
            reporting = True
        t1 = min(t + tick, workload.duration)
        poll = t >= next_poll - 1e-9
        if poll:
            next_poll += poll_s
        for name in models:
            drains = draining[name]
            timeout = settings.drain_timeout_s.get(name, DEFAULT_DRAIN_TIMEOUT_S)
            for iid, since in list(drains.items()):
                work = fleet.work_on(name, iid)
                if work == 0 or t - since >= timeout:
                    del drains[iid]
                    if work > 0:  # deleted past its drain timeout: its work is cut and retried
                        fleet.interrupt(name, [iid], t)
            queue = pending[name]
            if poll:
                current = len(ready[name]) + len(queue)
                desired = max(0, min(settings.max_instances, decide(name, t, fleet.signals(name), current)))
                while current < desired:
                    counter += 1
                    queue.append((t + delays[name], f"{name}-{counter}"))
                    current += 1
                while current > desired and queue:
                    queue.pop()  # cancel what is still provisioning first
                    current -= 1
                while current > desired and ready[name]:
                    drains[ready[name].pop()] = t
                    current -= 1
            while queue and queue[0][0] <= t + 1e-9:
                ready[name].append(queue.popleft()[1])
            fleet.set_instances(name, ready[name], list(drains), t)
            if reporting:
                fleet.bill(name, t, t1, len(ready[name]) + len(queue) + len(drains))
        fleet.advance(t, t1)
        t = round(t1, 6)
    return fleet


def run_static(
    workload: Workload,
    models: Mapping[str, TierModel],
    settings: BaselineSettings,
    counts: Mapping[str, int] | None = None,
) -> Fleet:
    """``counts``: each tier's static size, when already known (``run_baselines`` has the oracle's peaks)."""
    if counts is None:
        counts = {name: static_count(workload, m, settings.slo_goal) for name, m in models.items()}
    return run_counts(
        workload, models, lambda name, _t, _s, _c: counts[name], settings,
        poll_s=workload.duration, initial=counts, delay_s=0.0,
    )  # fmt: skip


def keda_target(model: TierModel, utilisation: float) -> float:
    """The KEDA threshold a user derives from ``scalectl plan``: running requests per replica at
    ``utilisation`` of what one server runs at once (its KV slots, capped by vLLM's max-num-seqs)."""
    profile = model.profile
    assert profile is not None
    plan = make_plan(profile.model, profile.gpu, max_model_len=profile.max_model_len, gpu_count=model.gpu_count)
    return max(1.0, utilisation * min(plan.sessions_per_server, profile.max_num_seqs))


def reactive_policy(workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings) -> Hpa:
    tiers = {}
    for name, model in models.items():
        low, high = settings.bounds_of(name, 0 if isinstance(model.load, BatchLoad) else 1)
        if isinstance(model.load, BatchLoad):  # KEDA's RabbitMQ scaler: queue length per replica = concurrency
            tiers[name] = HpaTier(float(model.load.concurrency), low, high, batch=True)
        else:
            tiers[name] = HpaTier(keda_target(model, settings.target_utilisation), low, high)
    return Hpa(tiers, tolerance=settings.tolerance, stabilization_s=settings.stabilization_s)


def skyserve_policy(workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings) -> SkyServe:
    tiers = {}
    for name, model in models.items():
        assert model.profile is not None, "SkyServe serves HTTP replicas; batch tiers have no request rate"
        qps = capacity_for(model.profile, model.load, workload).rate
        low, high = settings.bounds_of(name, 1)
        tiers[name] = SkyServeTier(max(qps, 1e-6), low, high)
    return SkyServe(
        tiers,
        decision_interval_s=settings.skyserve_decision_s,
        upscale_delay_s=settings.skyserve_upscale_delay_s,
        downscale_delay_s=settings.skyserve_downscale_delay_s,
    )


def run_reactive(workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings) -> Fleet:
    decide = reactive_policy(workload, models, settings)
    floors = {name: spec.min_replicas for name, spec in decide.tiers.items()}
    return run_counts(
        workload, models, decide, settings, poll_s=settings.poll_s, initial=floors,
        delay_s={name: settings.delay_of(name) for name in models},
    )  # fmt: skip


def run_skyserve(workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings) -> Fleet:
    decide = skyserve_policy(workload, models, settings)
    floors = {name: spec.min_replicas for name, spec in decide.tiers.items()}
    return run_counts(
        workload, models, decide, settings, poll_s=settings.skyserve_decision_s, initial=floors,
        delay_s={name: settings.delay_of(name) for name in models},
    )  # fmt: skip


Baselines = dict[str, dict[str, BaselineOutcome]]  # tier -> baseline -> outcome
BaselinePart = tuple[Callable[..., Baselines], tuple[Any, ...]]


def _oracle_and_static(workload: Workload, models: Mapping[str, TierModel], cfg: BaselineSettings) -> Baselines:
    """The oracle, the clairvoyant from its need timeline, then the static fleet at the oracle's busiest
    minute (one need timeline serves all three; a batch oracle has no peak, and its static size and the
    clairvoyant's boots come from a timeline of its own)."""
    oracles: dict[str, BaselineOutcome] = {}
    seers: dict[str, BaselineOutcome] = {}
    for name, model in models.items():
        timeline = None if isinstance(model.load, BatchLoad) else _timeline(workload, model, cfg.slo_goal)
        oracles[name] = _oracle(workload, model, timeline)
        need = timeline[1] if timeline is not None else need_timeline(workload, model, cfg.slo_goal)[1]
        seers[name] = clairvoyant(oracles[name], need, model, cfg.boot_of(name), workload.seed)
    counts = {
        name: max(1, found.peak) if found.peak is not None else static_count(workload, models[name], cfg.slo_goal)
        for name, found in oracles.items()
    }
    static = _outcomes("static", run_static(workload, models, cfg, counts=counts), workload)
    return {
        name: {**static.get(name, {}), "oracle": found, "clairvoyant": seers[name]} for name, found in oracles.items()
    }


def _driven(
    label: str, runner: Callable[..., Fleet], workload: Workload, models: Mapping[str, TierModel], cfg: BaselineSettings
) -> Baselines:
    return _outcomes(label, runner(workload, models, cfg), workload)


def _outcomes(label: str, fleet: Fleet, workload: Workload) -> Baselines:
    return {
        name: {label: BaselineOutcome(label, out.cost, out.gpu_hours, out.slo_attainment)}
        for name, out in outcomes(fleet, workload.duration).items()
    }


def baseline_parts(
    workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings | None = None
) -> list[BaselinePart]:
    """The baselines as independent jobs (function, arguments), to run one after another or side by side
    in processes: the oracle and the static fleet sized by it, KEDA/HPA, SkyServe-style (serving tiers)."""
    cfg = settings or BaselineSettings()
    serving = {name: m for name, m in models.items() if not isinstance(m.load, BatchLoad)}
    parts: list[BaselinePart] = [
        (_oracle_and_static, (workload, models, cfg)),
        (_driven, ("reactive", run_reactive, workload, models, cfg)),
    ]
    if serving:
        parts.append((_driven, ("skyserve", run_skyserve, workload, serving, cfg)))
    return parts


BASELINE_ORDER = ("static", "reactive", "skyserve", "oracle", "clairvoyant")


PART_LABELS = {"reactive": "reactive (KEDA/HPA)", "skyserve": "SkyServe-style"}


def part_label(part: BaselinePart) -> str:
    """What a part of ``baseline_parts`` runs, in the report's words (for a wait to say what it waits for)."""
    job, args = part
    if job is _oracle_and_static:
        return "oracle, clairvoyant and static"
    return PART_LABELS.get(str(args[0]), str(args[0]))


def merge_parts(models: Mapping[str, TierModel], parts: list[Baselines]) -> Baselines:
    """The parts' outcomes per tier, in the report's order: static, reactive, SkyServe-style, oracle,
    clairvoyant."""
    found: Baselines = {name: {} for name in models}
    for part in parts:
        for name, per in part.items():
            found[name].update(per)
    return {name: {k: per[k] for k in BASELINE_ORDER if k in per} for name, per in found.items()}


def run_baselines(
    workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings | None = None
) -> Baselines:
    """Static, reactive, SkyServe-style (serving tiers), oracle and clairvoyant outcomes per tier, one after
    another."""
    return merge_parts(models, [job(*args) for job, args in baseline_parts(workload, models, settings)])
