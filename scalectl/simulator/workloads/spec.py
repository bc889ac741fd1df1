"""The workload file: what each tier is asked to do over the simulated period.

```yaml
seed: 7
start: "2026-03-16T00:00:00-04:00"   # a Monday, local midnight in New York
duration: 24h
tiers:
  orchestrator: {kind: sessions, sessions: 100, think_time: [100ms, 500ms], ...}
  chat: {kind: trace, path: ../../shared/traces/azure-llm-2023-conv.csv, repeat: 0}
  research: {kind: batch, bursts: [{at: 1h, tasks: 500, over: 1m}], task_time: {mean: 40, cv: 0.5}}
```
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scalectl.policies.durations import Duration
from scalectl.simulator.workloads.shapes import Shape
from scalectl.simulator.workloads.tokens import TokenDist
from scalectl.sizing.boot import DEFAULT_FIGURES, GB, MB, BootFigures, Span

DEFAULT_START = "2026-03-16T00:00:00+00:00"  # a Monday


def _mb_s(span: Span) -> tuple[float, float]:
    return (span.low / MB, span.high / MB)


def _s(span: Span) -> tuple[float, float]:
    return (span.low, span.high)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tokens(_Strict):
    """A token count: a number, or ``{mean, cv, min, max}`` for a lognormal spread."""

    mean: float = Field(gt=0)
    cv: float = Field(0.0, ge=0, le=5)
    min: int = Field(1, ge=1)
    max: int | None = Field(None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _from_number(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return {"mean": value}
        return value

    def dist(self) -> TokenDist:
        return TokenDist(self.mean, self.cv, self.min, self.max)


class TaskTime(_Strict):
    """How long one batch task runs: seconds (or a duration), or ``{mean, cv}`` (lognormal)."""

    mean: Duration
    cv: float = Field(0.0, ge=0, le=5)

    @model_validator(mode="before")
    @classmethod
    def _from_scalar(cls, value: Any) -> Any:
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            return {"mean": value}
        return value


class _Serving(_Strict):
    ttft_target: Duration = 0.5  # the TTFT SLO: a request meets it when its first token arrives within this
    shape: list[Shape] = Field(default_factory=list)


class _OpenLoop(_Serving):
    # A client with no first token this long after sending gives up: scalectl's nginx route cuts the
    # connection at its read timeout (600 s), and vLLM aborts a waiting request whose client is gone. The
    # request is a miss and leaves the queue. null: clients wait for ever (a backlog is never shed).
    client_timeout: Duration | None = Field(600.0, gt=0)


class SessionsLoad(_Serving):
    """Closed loop: ``sessions`` users (× the shape), each sending the next request a think time after the
    previous answer."""

    kind: Literal["sessions"]
    sessions: int = Field(gt=0, le=100_000)
    think_time: tuple[Duration, Duration] = (0.1, 0.5)
    input_tokens: Tokens = Tokens.model_validate({"mean": 600})
    output_tokens: Tokens = Tokens.model_validate({"mean": 350})
    prefix_cache_hit: float = Field(0.0, ge=0, lt=1)  # share of each prompt already in vLLM's prefix cache

    @field_validator("think_time")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        if value[0] > value[1]:
            raise ValueError(f"expected [min, max] with min <= max, got {list(value)}")
        return value


class PoissonLoad(_OpenLoop):
    """Open loop: requests arrive at ``rate`` per second (× the shape), independently of answers."""

    kind: Literal["poisson"]
    rate: float = Field(gt=0)
    input_tokens: Tokens = Tokens.model_validate({"mean": 600})
    output_tokens: Tokens = Tokens.model_validate({"mean": 350})
    prefix_cache_hit: float = Field(0.0, ge=0, lt=1)


class TraceLoad(_OpenLoop):
    """Open loop: replay a recorded trace (Azure CSV or Mooncake JSONL), read where it lies."""

    kind: Literal["trace"]
    path: str
    format: Literal["auto", "azure", "mooncake"] = "auto"
    rate_scale: float = Field(1.0, gt=0, le=1000)  # < 1 thins, > 1 replicates the trace
    # How copies are made: each its own stream, the trace shifted by a random offset (independent users),
    # or each request drawn several times within one mean gap (clumped: the old form, for old results).
    replication: Literal["independent", "clumped"] = "independent"
    time_scale: float = Field(1.0, gt=0, le=1000)  # > 1 stretches the trace in time
    repeat: int = Field(1, ge=0)  # tile the trace this many times; 0 = fill the whole duration
    offset: Duration = 0.0  # start the replay this long after the simulation start
    prefix_cache_hit: float | None = Field(None, ge=0, lt=1)  # None: from the trace (Mooncake hash_ids)


class Burst(_Strict):
    at: Duration  # after the simulation start
    tasks: int = Field(gt=0)
    over: Duration = 60.0
    every: Duration | None = None  # repeat the burst with this period


class BatchLoad(_Strict):
    """Celery tasks: bursts (and an optional steady ``rate`` × the shape) of tasks that each run
    ``task_time`` on an instance taking ``concurrency`` tasks at once."""

    kind: Literal["batch"]
    bursts: list[Burst] = Field(default_factory=list)
    rate: float = Field(0.0, ge=0)  # tasks per second outside bursts
    shape: list[Shape] = Field(default_factory=list)
    task_time: TaskTime = TaskTime.model_validate({"mean": 60.0})
    concurrency: int = Field(8, gt=0, le=4096)  # tasks one instance runs at once (Celery worker concurrency)
    wait_target: Duration = 300.0  # a task meets the SLO when it starts within this of being queued

    @model_validator(mode="after")
    def _has_work(self) -> BatchLoad:
        if not self.bursts and self.rate <= 0:
            raise ValueError("a batch load needs `bursts`, a `rate` above 0, or both")
        return self


class CapacityWindow(_Strict):
    """A capacity shortage: at most ``spot`` / ``on-demand`` machines of one GPU (per region) may run from
    ``from`` until ``until`` (after the simulation start); creates beyond it fail with no capacity."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    spot: int | None = Field(None, ge=0)
    on_demand: int | None = Field(None, ge=0, alias="on-demand")
    from_: Duration = Field(0.0, alias="from")
    until: Duration | None = None  # None: to the end of the run

    @model_validator(mode="after")
    def _says_something(self) -> CapacityWindow:
        if self.spot is None and self.on_demand is None:
            raise ValueError("a capacity window needs `spot`, `on-demand` or both (machines allowed at once)")
        if self.until is not None and self.until <= self.from_:
            raise ValueError(f"`until` ({self.until:g}s) must come after `from` ({self.from_:g}s)")
        return self


class SpotStorm(_Strict):
    """A window with a different spot interruption rate (per spot instance per hour)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    from_: Duration = Field(alias="from")
    until: Duration
    spot_interruptions_per_hour: float = Field(ge=0, le=3600)

    @model_validator(mode="after")
    def _ordered(self) -> SpotStorm:
        if self.until <= self.from_:
            raise ValueError(f"`until` ({self.until:g}s) must come after `from` ({self.from_:g}s)")
        return self


def _span(value: tuple[float, float], unit: str, example: str) -> tuple[float, float]:
    low, high = value
    if not (0 < low <= high):
        raise ValueError(
            f"expected [min, max] in {unit} with 0 < min <= max, got [{low:g}, {high:g}]; e.g. {example}, or one "
            "value above 0 for a fixed figure"
        )
    return value


def _one_or_two(value: Any) -> Any:
    """One figure stands for a fixed [figure, figure]."""
    return [value, value] if isinstance(value, int | float | str) and not isinstance(value, bool) else value


class BootSpec(_Strict):
    """What a simulated boot is made of (scalectl.sizing.boot): the path, and overrides of the figures.
    Every field is optional; the defaults are the documented public figures (docs/simulator.md)."""

    path: Literal["cold", "cached"] = "cold"  # cached: image pre-pulled, weights and compile cache on disk
    provision: tuple[Duration, Duration] | None = None  # create → machine up; None: the provider type's figure
    image_gb: float = DEFAULT_FIGURES.image_bytes / GB  # the serving image as pulled
    pull_mb_s: tuple[float, float] = _mb_s(DEFAULT_FIGURES.pull_bandwidth)
    download_mb_s: tuple[float, float] = _mb_s(DEFAULT_FIGURES.download_bandwidth)
    load_mb_s: tuple[float, float] = _mb_s(DEFAULT_FIGURES.load_bandwidth)
    compile: tuple[Duration, Duration] = _s(DEFAULT_FIGURES.compile)
    compile_cached: tuple[Duration, Duration] = _s(DEFAULT_FIGURES.compile_cached)
    warmup: tuple[Duration, Duration] = _s(DEFAULT_FIGURES.warmup)

    _fixed = field_validator(
        "provision", "pull_mb_s", "download_mb_s", "load_mb_s", "compile", "compile_cached", "warmup", mode="before"
    )(_one_or_two)

    @field_validator("image_gb")
    @classmethod
    def _image_size(cls, value: float) -> float:
        if not 0 < value <= 1000:
            raise ValueError(f"expected the image size in GB, above 0 and at most 1000, got {value:g}; e.g. 12")
        return value

    @field_validator("pull_mb_s", "download_mb_s", "load_mb_s")
    @classmethod
    def _bandwidth(cls, value: tuple[float, float]) -> tuple[float, float]:
        return _span(value, "MB/s", "[25, 100]")

    @field_validator("provision", "compile", "compile_cached", "warmup")
    @classmethod
    def _duration(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        return None if value is None else _span(value, "seconds", "[20s, 1m]")

    def figures(self) -> BootFigures:
        return BootFigures(
            image_bytes=self.image_gb * GB,
            pull_bandwidth=Span(self.pull_mb_s[0] * MB, self.pull_mb_s[1] * MB),
            download_bandwidth=Span(self.download_mb_s[0] * MB, self.download_mb_s[1] * MB),
            load_bandwidth=Span(self.load_mb_s[0] * MB, self.load_mb_s[1] * MB),
            compile=Span(*self.compile),
            compile_cached=Span(*self.compile_cached),
            warmup=Span(*self.warmup),
        )

    def provision_span(self) -> Span | None:
        return None if self.provision is None else Span(*self.provision)


class CloudSpec(_Strict):
    """The simulated cloud every provider of the tiers file stands for during the run."""

    # create → serving, uniform [min, max]: replaces the boot model (``boot``) when given
    provision_delay: tuple[Duration, Duration] | None = None
    boot: BootSpec = Field(default_factory=lambda: BootSpec.model_validate({}))
    spot_interruptions_per_hour: float = Field(0.0, ge=0, le=3600)  # per spot instance, outside storms
    notice: Duration = 120.0  # warning before a preemption (AWS: 2m, GCP: 30s); 0 = none
    storms: list[SpotStorm] = Field(default_factory=list)
    capacity: dict[str, list[CapacityWindow]] = Field(default_factory=dict)  # GPU -> one window or a list
    # Stopped machines (a tier's warm_pool): what a stopped one's disk bills an hour, and the share of starts
    # refused because the GPU on its host was taken meanwhile (RunPod, EC2: refused; see docs/providers).
    storage_per_hour: float = Field(0.02, ge=0)
    resume_failure_rate: float = Field(0.0, ge=0, le=1)

    _fixed = field_validator("provision_delay", mode="before")(_one_or_two)

    @field_validator("provision_delay")
    @classmethod
    def _delay_ordered(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and value[0] > value[1]:
            raise ValueError(f"expected [min, max] with min <= max, got {list(value)}")
        return value

    @model_validator(mode="after")
    def _delay_or_boot(self) -> CloudSpec:
        # A boot other than the default next to provision_delay would be ignored: refuse it. (Not "boot given":
        # a dumped and revalidated spec carries its default boot.)
        if self.provision_delay is not None and self.boot != BootSpec.model_validate({}):
            raise ValueError(
                "`provision_delay` replaces the boot model that `boot` configures; remove one of them "
                '(docs/simulator.md, "What a boot is made of")'
            )
        return self

    @field_validator("capacity", mode="before")
    @classmethod
    def _windows_as_lists(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {gpu: (w if isinstance(w, list) else [w]) for gpu, w in value.items()}
        return value

    @field_validator("capacity")
    @classmethod
    def _known_gpus(cls, value: dict[str, list[CapacityWindow]]) -> dict[str, list[CapacityWindow]]:
        from scalectl.sizing.gpus import UnknownGpu, normalize_gpu

        for gpu in value:
            try:
                normalize_gpu(gpu)
            except UnknownGpu as exc:
                raise ValueError(str(exc)) from None
        return value

    def capacity_windows(self) -> list[tuple[str, CapacityWindow]]:
        """(GPU, window) pairs, windows of one GPU in the order written."""
        return [(gpu, w) for gpu, windows in self.capacity.items() for w in windows]


TierLoad = Annotated[SessionsLoad | PoissonLoad | TraceLoad | BatchLoad, Field(discriminator="kind")]
_KINDS = "sessions, poisson, trace, batch"


class RolloutEvent(_Strict):
    """`scalectl rollout restart TIER` at ``at`` after the start: every instance of the tier is replaced."""

    tier: str
    at: Duration = Field(ge=0)


class Workload(_Strict):
    seed: int = 0
    start: str = DEFAULT_START
    duration: Duration = 86400.0
    tiers: dict[str, TierLoad] = Field(min_length=1)
    cloud: CloudSpec = Field(default_factory=lambda: CloudSpec.model_validate({}))
    rollouts: list[RolloutEvent] = Field(default_factory=list)  # rolling replacements during the run
    # steady: the run opens on a fleet that has served the opening traffic for a while (a warm-up before
    # the start, not in the report); cold: nothing ran before the start (the fleet boots at t = 0).
    warmup: Literal["steady", "cold"] = "steady"
    base_dir: str = Field(".", exclude=True)  # where relative trace paths start (the workload file's folder)

    @field_validator("start", mode="before")
    @classmethod
    def _start_is_a_time(cls, value: Any) -> str:
        text = value.isoformat() if isinstance(value, datetime) else str(value)
        try:
            datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f'expected an ISO time like "2026-03-16T08:00:00-04:00", got {value!r}') from None
        return text

    @model_validator(mode="after")
    def _rollouts_fit(self) -> Workload:
        for i, event in enumerate(self.rollouts):
            if event.tier not in self.tiers:
                known = ", ".join(self.tiers)
                where = f'rollouts[{i}].tier: "{event.tier}"'
                raise ValueError(f"{where} has no load in this workload (its tiers: {known})")
            if event.at >= self.duration:
                where = f"rollouts[{i}].at: {event.at:g}s"
                raise ValueError(f"{where} is not before the end of the run ({self.duration:g}s)")
        return self

    @property
    def start_epoch(self) -> float:
        stamp = datetime.fromisoformat(self.start)
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()

    def trace_path(self, load: TraceLoad) -> Path:
        """The trace file: ``$VARS`` and ``${VAR:-default}`` expanded, relative paths taken from the workload
        file's folder."""
        p = Path(os.path.expandvars(_expand_defaults(load.path))).expanduser()
        return Path(os.path.normpath(p if p.is_absolute() else Path(self.base_dir) / p))


_VAR_DEFAULT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}")


def _expand_defaults(text: str) -> str:
    """``${VAR:-default}``: the variable when set and not empty, else the default (as in the shell)."""
    return _VAR_DEFAULT.sub(lambda m: os.environ.get(m.group(1)) or m.group(2), text)


class WorkloadError(ValueError):
    """A workload problem a person can fix; ``str()`` names the file, the tier and the field."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))


def _where(loc: tuple[Any, ...]) -> str:
    parts = list(loc)
    prefix = ""
    if len(parts) >= 2 and parts[0] == "tiers":
        prefix = f'tier "{parts[1]}": '
        parts = parts[2:]
        if parts and parts[0] in ("sessions", "poisson", "trace", "batch"):
            parts = parts[1:]  # the discriminator tag pydantic inserts
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("constant", "diurnal", "spike", "daily") or str(part).startswith("function-"):
            continue
        else:
            path += f".{part}" if path else str(part)
    return prefix + (f"{path}: " if path else "")


def parse_workload(text: str, source: str = "<workload>", base_dir: str | Path = ".") -> Workload:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise WorkloadError(source, [f"{where}invalid YAML: {getattr(exc, 'problem', None) or exc}"]) from None
    if not isinstance(data, Mapping) or "tiers" not in data:
        raise WorkloadError(source, ["expected a mapping with a top-level `tiers:` key"])
    try:
        return Workload.model_validate({**data, "base_dir": str(base_dir)})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            message = re.sub(r"^(Value error|Assertion failed), ", "", err["msg"])
            if err["type"] == "extra_forbidden":
                message = "unknown field; remove it or check its spelling (see docs/simulator.md)"
            elif err["type"] in ("union_tag_invalid", "union_tag_not_found"):
                message = f"`kind` must be one of: {_KINDS}"
            elif err["type"] == "missing":
                message = "required field is missing"
            elif "input" in err and err["type"] != "value_error" and not isinstance(err["input"], dict | list):
                message = f"{message}, got {err['input']!r}"
            problems.append(f"{_where(tuple(err['loc']))}{message}")
        raise WorkloadError(source, problems) from None


def load_workload(path: str | Path) -> Workload:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(str(p), [f"cannot read the file: {exc.strerror}"]) from None
    return parse_workload(text, str(p), p.parent)
