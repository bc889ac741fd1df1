"""Search a tier's policy settings with the simulator: the cheapest settings whose SLO attainment meets a target.

The search space is every field of the tier's policy model that declares a range (``scalectl.policies.tunable``),
nested models included (``reactive.queue_per_instance``). Each trial replays the workload's traffic for that
tier through the real controller with the trial's settings (no baselines) and scores its cost and SLO
attainment; Optuna's TPE sampler proposes the next settings, treating ``SLO >= target`` as a constraint.
Trials run in parallel worker processes (ask/tell: the study lives in this process).
"""

from __future__ import annotations

import concurrent.futures
import gc
import math
import multiprocessing
import os
import socket
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from scalectl.policies.spec import PolicySpec
from scalectl.policies.tunable import TuneRange, tune_range
from scalectl.simulator.controller_run import Checkpoint, RunOptions, RunStopped, simulate
from scalectl.simulator.worker_process import exit_with_parent
from scalectl.simulator.workloads.sources import KEPT, keep_arrivals
from scalectl.simulator.workloads.spec import SessionsLoad, Workload
from scalectl.tiers.config import FleetConfig, TierSpec

_POLICY: TypeAdapter[Any] = TypeAdapter(PolicySpec)


class TuneInputError(ValueError):
    """The tier cannot be tuned as asked; the message names the file, tier and fix."""


@dataclass(frozen=True, slots=True)
class Param:
    name: str  # dotted path inside the policy block, e.g. "reactive.stabilization"
    range: TuneRange
    integer: bool


@dataclass(frozen=True, slots=True)
class TrialResult:
    number: int
    params: dict[str, float | int]
    cost: float | None  # None: the trial failed (settings rejected by validation); stopped: the cost so far
    slo: float | None  # stopped: None
    error: str | None = None
    stopped: str | None = None  # why the trial was stopped early: it could no longer be the best, or lagged its pace
    stopped_at: float | None = None  # virtual seconds into the run where it stopped
    spent: tuple[tuple[float, float, int], ...] = ()  # (virtual seconds, dollars, misses) so far, per checkpoint

    @property
    def finished(self) -> bool:
        """Run to the end with a cost and an SLO (not failed, not stopped early)."""
        return self.stopped is None and self.cost is not None and self.slo is not None

    def feasible(self, target: float) -> bool:
        return self.finished and self.slo is not None and self.slo >= target


@dataclass(slots=True)
class TuneResult:
    tier: str
    slo_target: float
    base_policy: dict[str, Any]  # the tier's policy block as written
    space: list[Param]
    trials: list[TrialResult] = field(default_factory=list)
    requests: int | None = None  # requests (tasks) in the tier's traffic, once a trial has run out

    @property
    def best(self) -> TrialResult | None:
        """The cheapest trial that meets the SLO target (earliest on a tie); None when none does."""
        feasible = [t for t in self.trials if t.feasible(self.slo_target)]
        return min(feasible, key=lambda t: (t.cost, t.number)) if feasible else None

    @property
    def closest(self) -> TrialResult | None:
        """When no trial meets the target: the one with the highest SLO (cheapest on a tie)."""
        done = [t for t in self.trials if t.finished]
        return max(done, key=lambda t: (t.slo, -(t.cost or 0.0), -t.number)) if done else None

    def frontier(self) -> list[TrialResult]:
        """Trials no other trial beats on both cost and SLO, cheapest first."""
        done = sorted((t for t in self.trials if t.finished), key=lambda t: (t.cost or 0.0, -(t.slo or 0.0)))
        out: list[TrialResult] = []
        for t in done:
            if not out or (t.slo or 0.0) > (out[-1].slo or 0.0):
                out.append(t)
        return out

    def policy_for(self, trial: TrialResult) -> dict[str, Any]:
        """The policy block with the trial's settings, in YAML-ready form (durations as "90s")."""
        merged = _POLICY.validate_python(policy_with(self.base_policy, trial.params))
        dumped = merged.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return {"kind": dumped.pop("kind"), **dumped}


# ---- the search space ------------------------------------------------------------------------------------
def _nested_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _is_integer(annotation: Any) -> bool:
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    return int in args or annotation is int


def search_space(model: type[BaseModel], prefix: str = "") -> list[Param]:
    """Every field of ``model`` with a declared tune range (recursing into nested models)."""
    params: list[Param] = []
    for name, info in model.model_fields.items():
        nested = _nested_model(info.annotation)
        if nested is not None:
            params.extend(search_space(nested, f"{prefix}{name}."))
            continue
        declared = tune_range(info.json_schema_extra)
        if declared is not None:
            params.append(Param(f"{prefix}{name}", declared, _is_integer(info.annotation)))
    return params


def policy_with(base: Mapping[str, Any], params: Mapping[str, float | int]) -> dict[str, Any]:
    out: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for dotted, value in params.items():
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _round(value: float, digits: int = 3) -> float:
    """Three significant digits: what a person would write in the YAML (and what the trial then runs)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


# ---- one trial (runs in a worker process) ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Bound:
    """What a trial must stay within to still be the best: the cheapest feasible trial's cost so far, and
    (traffic that does not depend on the settings: open-loop requests, batch tasks) the misses the SLO
    target allows over the whole run. Cost only grows and misses only add up, so a trial past either
    cannot win: it is stopped there."""

    cost: float | None = None
    misses: int | None = None
    pace: Pace | None = None

    def reason(self, tier: str, checkpoint: Checkpoint) -> str | None:
        hours = checkpoint.t / 3600
        spent = checkpoint.cost.get(tier, 0.0)
        if self.cost is not None and spent > self.cost:
            return f"${spent:,.2f} by hour {hours:g}, past the best trial's ${self.cost:,.2f}"
        met, judged = checkpoint.slo.get(tier, (0, 0))
        if self.misses is not None and judged - met > self.misses:
            return f"{judged - met:,} misses by hour {hours:g}, more than the SLO target allows ({self.misses:,})"
        return self.pace.reason(checkpoint.t, spent) if self.pace is not None else None


@dataclass(frozen=True, slots=True)
class PaceRule:
    """When ``Pace`` applies: after ``warmup`` (a share of the run), ``margin`` ahead of the best trial."""

    warmup: float
    margin: float

    def behind(self, best: Sequence[tuple[float, float, int]], duration: float) -> Pace:
        """The pace of a best trial's checkpoints ``(virtual seconds, dollars, misses)`` over a run of
        ``duration`` seconds."""
        return Pace({t: dollars for t, dollars, _ in best}, self.warmup * duration, self.margin)


NEGLIGIBLE = 0.01  # of the best trial's cost: no trial is stopped for being this little ahead
PACE = PaceRule(warmup=0.25, margin=0.05)  # no wrong stop on 160 trials run out, 4 days (docs/simulator.md)


@dataclass(frozen=True, slots=True)
class Pace:
    """A guess, not a bound: the best trial's cost at each checkpoint (``spent``: virtual seconds → dollars).
    Once ``warmup`` seconds of the run are past, a trial spending more than ``margin`` ahead of it at the
    same checkpoint is stopped. A trial's cost so far tracks its final cost closely on fixed traffic (the
    same arrivals in every trial), so one that far ahead rarely finishes under the best: how rarely is
    measured by ``bench/bench_tune.py --replay`` on trials run out, and the docs give the numbers."""

    spent: Mapping[float, float]
    warmup: float
    margin: float = 0.05

    def reason(self, t: float, spent: float) -> str | None:
        best = self.spent.get(round(t, 3))
        if best is None or t < self.warmup or spent <= best * (1.0 + self.margin):
            return None
        # Near nothing spent (a tier at zero), a few cents are a large share: ahead by a whole-run sliver too.
        if spent - best <= NEGLIGIBLE * max(self.spent.values()):
            return None
        ahead = 100 * (spent / best - 1.0) if best > 0 else math.inf
        return f"${spent:,.2f} by hour {t / 3600:g}, {ahead:.0f}% ahead of the best trial's ${best:,.2f} then (pace)"


@dataclass(frozen=True, slots=True)
class TrialJob:
    config: FleetConfig
    config_text: str
    workload: Workload
    tier: str
    policy: dict[str, Any]
    bound: Bound = Bound()


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    cost: float  # stopped: the cost so far
    slo: float | None  # stopped: None
    requests: int = 0  # requests (tasks) that arrived
    stopped: str | None = None
    stopped_at: float | None = None  # virtual seconds into the run
    spent: tuple[tuple[float, float, int], ...] = ()  # (virtual seconds, dollars, misses) so far, per checkpoint


def with_policy(config: FleetConfig, tier: str, policy: Mapping[str, Any]) -> FleetConfig:
    """The configuration with one tier's policy block replaced (validated as the tiers file would be)."""
    spec = config.tiers[tier].model_dump(by_alias=True, exclude_unset=True)
    tiers = dict(config.tiers)
    tiers[tier] = TierSpec.model_validate({**spec, "policy": dict(policy)})
    return config.model_copy(update={"tiers": tiers})


def text_with_policy(text: str, tier: str, policy: Mapping[str, Any]) -> str:
    """The tiers file with one tier's policy block replaced: the store keeps (and the controller reads)
    the configuration as text, so a trial's settings must be in the text, not only in the parsed model."""
    document = yaml.safe_load(text)
    document["tiers"][tier]["policy"] = dict(policy)
    return str(yaml.safe_dump(document, sort_keys=False))


def run_trial(job: TrialJob) -> TrialOutcome:
    """Cost and SLO attainment of the tier with ``job.policy`` on the workload, or where it was stopped."""
    config = with_policy(job.config, job.tier, job.policy)
    text = text_with_policy(job.config_text, job.tier, job.policy)
    spent: list[tuple[float, float, int]] = []

    def stop(checkpoint: Checkpoint) -> str | None:
        met, judged = checkpoint.slo.get(job.tier, (0, 0))
        spent.append((round(checkpoint.t, 3), checkpoint.cost.get(job.tier, 0.0), judged - met))  # a pace for later
        return job.bound.reason(job.tier, checkpoint)

    # about 48 looks at a run (every 30 minutes of a day), each a sum over what was billed and judged since
    options = RunOptions(baselines=False, stop=stop, check_every_s=max(60.0, job.workload.duration / 48))
    try:
        result = simulate(config, text, job.workload, options=options)
    except RunStopped as stopped:
        checkpoint, reason = stopped.checkpoint, stopped.reason
    else:
        outcome = result.report.tiers[job.tier]
        return TrialOutcome(outcome.cost, outcome.slo_attainment, outcome.requests, spent=tuple(spent))
    # The stopped run's fleet (hundreds of MB of arrays) hangs on a reference cycle through the exception's
    # traceback and the event loop's task; collected only when the cycle collector next runs, it grew each
    # search worker by about 360 MB per stopped trial.
    gc.collect()
    return TrialOutcome(
        checkpoint.cost.get(job.tier, 0.0), None, stopped=reason, stopped_at=checkpoint.t, spent=tuple(spent)
    )


# ---- the study ------------------------------------------------------------------------------------------
Progress = Callable[[TuneResult], None]


def prepare(
    config: FleetConfig, workload: Workload, tier: str, source: str = "tiers file", workload_source: str = "workload"
) -> TuneResult:
    """Check the tier can be tuned on this workload; the search space and the tier's own policy block."""
    if tier not in config.tiers:
        raise TuneInputError(f'{source}: no tier "{tier}"; its tiers: {", ".join(config.tiers)}')
    policy = config.tiers[tier].policy
    space = search_space(type(policy))
    if not space:
        raise TuneInputError(
            f'{source}: tier "{tier}": policy kind {policy.kind!r} has no tunable settings; '
            "tune a built-in policy (min-floor, predictive, scale-to-zero)"
        )
    if tier not in workload.tiers:
        raise TuneInputError(
            f'{workload_source}: no traffic for tier "{tier}" (its tiers: {", ".join(workload.tiers)}); '
            "add the tier to the workload or pick another --tier"
        )
    base = policy.model_dump(by_alias=True, exclude_unset=True)
    base["kind"] = policy.kind
    return TuneResult(tier, 0.0, base, space)


def _suggest(trial: Any, param: Param) -> float | int:
    r = param.range
    if param.integer:
        return int(trial.suggest_int(param.name, int(r.low), int(r.high), log=r.log))
    if r.step is not None:
        return _round(float(trial.suggest_float(param.name, r.low, r.high, step=r.step)))
    return _round(float(trial.suggest_float(param.name, r.low, r.high, log=r.log)))


def _current(policy: BaseModel, space: list[Param]) -> dict[str, float | int]:
    """The tier's own settings that lie inside the space: the first trial starts from them."""
    out: dict[str, float | int] = {}
    for p in space:
        node: Any = policy
        for part in p.name.split("."):
            node = getattr(node, part, None)
        if isinstance(node, int | float) and p.range.low <= node <= p.range.high:
            out[p.name] = int(node) if p.integer else float(node)
    return out


def tune(
    config: FleetConfig,
    config_text: str,
    workload: Workload,
    tier: str,
    *,
    trials: int,
    slo_target: float,
    jobs: int = 1,
    seed: int = 0,
    progress: Progress | None = None,
    source: str = "tiers file",
    stop_early: bool = True,
    pace: PaceRule | None = PACE,
    storage: str | None = None,
    study_name: str | None = None,
) -> TuneResult:
    """Run ``trials`` simulations of ``tier`` with settings proposed by Optuna; see ``TuneResult.best``.

    ``stop_early``: a trial that can no longer be the best (``Bound``) is stopped where it shows; it is
    then off the frontier (its SLO is not known), which ``stop_early=False`` keeps whole. ``pace``: also stop
    a trial spending well ahead of the best trial at the same point of the run (``Pace``; a guess: None
    keeps only the exact bounds).

    ``storage``: an Optuna RDB URL (``postgresql://…``, ``sqlite:///…``); the trials go into the study
    ``study_name`` there, created or resumed, so several processes or machines search one study and the
    result (``best``, the frontier) is the whole study's, this process's ``trials`` and everyone else's."""
    try:
        import optuna
    except ModuleNotFoundError:
        raise TuneInputError("scalectl tune needs Optuna: pip install 'scalectl[tune]'") from None
    result = prepare(config, workload, tier, source)
    result.slo_target = slo_target
    only = workload.model_copy(update={"tiers": {tier: workload.tiers[tier]}})
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if storage is None:
        sampler = optuna.samplers.TPESampler(seed=seed)
        study = optuna.create_study(direction="minimize", sampler=sampler)
    else:  # several workers, one study (scalectl/simulator/tune_study.py)
        from scalectl.simulator.tune_study import shared_study, whole_study

        study = shared_study(storage, study_name or tier, tier, slo_target, seed)
    start = _current(config.tiers[tier].policy, result.space)
    if start:
        study.enqueue_trial(start, skip_if_exists=True)

    fixed_traffic = not isinstance(only.tiers[tier], SessionsLoad)  # closed-loop sessions send as served

    def bound() -> Bound:
        if not stop_early:
            return Bound()
        best, requests = result.best, result.requests
        misses = None if requests is None or not fixed_traffic else int((1 - slo_target) * requests)
        paced = pace.behind(best.spent, only.duration) if best is not None and pace is not None else None
        return Bound(best.cost if best is not None else None, misses, paced)

    def submit(pool: concurrent.futures.Executor | None) -> tuple[Any, dict[str, float | int], Any]:
        trial = study.ask()
        if storage is not None:  # which worker ran it: a shared study's trials come from several
            trial.set_user_attr("worker", WORKER)
        params = {p.name: _suggest(trial, p) for p in result.space}
        job = TrialJob(config, config_text, only, tier, policy_with(result.base_policy, params), bound())
        future = pool.submit(run_trial, job) if pool is not None else None
        return trial, params, (future if future is not None else job)

    def finish(trial: Any, params: dict[str, float | int], outcome: TrialOutcome | Exception) -> None:
        if isinstance(outcome, Exception):
            trial_result = TrialResult(trial.number, params, None, None, _one_line(outcome))
            trial.set_user_attr("error", trial_result.error)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        elif outcome.stopped is not None:
            trial_result = TrialResult(
                trial.number, params, outcome.cost, None, stopped=outcome.stopped, stopped_at=outcome.stopped_at,
                spent=outcome.spent,
            )  # fmt: skip
            trial.set_user_attr("stopped", outcome.stopped)
            trial.set_user_attr("stopped_at", outcome.stopped_at)
            trial.set_user_attr("cost", outcome.cost)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            result.requests = result.requests or outcome.requests
            trial_result = TrialResult(trial.number, params, outcome.cost, outcome.slo, spent=outcome.spent)
            # feasible at <= 0
            trial.set_constraint("slo", slo_target - (outcome.slo if outcome.slo is not None else 0.0))
            trial.set_user_attr("slo", outcome.slo)  # what another worker reads back (``study_trials``)
            trial.set_user_attr("requests", outcome.requests)
            study.tell(trial, outcome.cost)
        result.trials.append(trial_result)
        if progress is not None:
            progress(result)

    # Every trial replays the same traffic: each process draws it once (``KEPT``).
    if jobs <= 1:
        with KEPT.kept():
            for _ in range(trials):
                trial, params, job = submit(None)
                try:
                    outcome: TrialOutcome | Exception = run_trial(job)
                except (ValidationError, ValueError) as exc:
                    outcome = exc
                finish(trial, params, outcome)
        return whole_study(result, study) if storage is not None else result
    context = multiprocessing.get_context("spawn")  # no inherited threads or event loops in the workers
    start_worker = partial(_worker_start, os.getpid())
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=start_worker) as pool:
        running: dict[concurrent.futures.Future[Any], tuple[Any, dict[str, float | int]]] = {}
        submitted = 0
        while submitted < trials or running:
            while submitted < trials and len(running) < jobs:
                trial, params, future = submit(pool)
                running[future] = (trial, params)
                submitted += 1
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                trial, params = running.pop(future)
                error = future.exception()
                if error is not None and not isinstance(error, ValidationError | ValueError):
                    raise error
                finish(trial, params, error if isinstance(error, Exception) else future.result())
    return whole_study(result, study) if storage is not None else result


WORKER = f"{socket.gethostname()}:{os.getpid()}"


def _worker_start(parent: int) -> None:
    """A search worker keeps arrivals across its trials, and exits when the search process is gone."""
    keep_arrivals()
    exit_with_parent(parent)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
