"""Policy configuration, validated with pydantic. Field names match the tiers.yaml keys."""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scalectl.policies.durations import Duration
from scalectl.policies.tunable import tunable


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


TTFT_QUANTILES = (0.95, 0.99)  # the TTFT quantiles a tier's signals carry (p95, p99)
DEFAULT_TTFT_TARGET_S = 0.5  # user-facing agents: TTFT p95 < 500 ms


# Settings of the rule-based target tracking that the decision core replaced (docs/decision-core.md): each is
# refused with what took its place, so a file that sets one does not silently lose it.
RETIRED = {
    "target_utilization": "headroom now comes from each forecast's measured error (docs/decision-core.md)",
    "tolerance": "the dead band is the scale-in window's highest need and each forecast's measured error",
    "stabilization_max": "recurring bursts are predicted from the tier's history; `stabilization` is the window",
    "hedge_launches": "the core sizes the need at the boot horizon instead of hedging launches",
    # `mode: thresholds` (the queue/TTFT threshold rules) and its settings: the decision core replaced them.
    **dict.fromkeys(
        (
            "queue_per_instance",
            "scale_out_after",
            "scale_in_after",
            "cooldown",
            "in_flight_per_instance",
            "scale_in_step",
            "ttft_scale_out_step",
        ),
        "a setting of the retired `mode: thresholds`; the decision core sizes from load and capacity per "
        "instance (set `capacity` to the work in flight one instance serves where no engine model gives it)",
    ),
}
MODE_RETIRED = (
    "`mode: thresholds` was retired: the decision core replaced the threshold rules (docs/decision-core.md); "
    "remove `mode` and the threshold settings"
)
# Old setting name -> new one. The old name is still read, with one warning per process.
RENAMED = {"ttft_p95_max": "ttft_max"}
_warned: set[str] = set()
log = logging.getLogger("scalectl.config")


def renamed_settings(data: Any) -> Any:
    """A policy block with its deprecated setting names replaced (both names given: a ValueError); a retired
    setting is a ValueError that says what replaced it."""
    if not isinstance(data, dict):
        return data
    if "mode" in data:
        if data["mode"] != "target":
            raise ValueError(MODE_RETIRED)
        data = {k: v for k, v in data.items() if k != "mode"}  # the one mode left: saying so changes nothing
    retired = sorted(RETIRED.keys() & data.keys())
    if retired:
        why = "; ".join(f"{name}: {RETIRED[name]}" for name in retired)
        raise ValueError(f"{', '.join(retired)} no longer exist{'s' if len(retired) == 1 else ''}: remove "
                         f"{'it' if len(retired) == 1 else 'them'} ({why})")  # fmt: skip
    if not RENAMED.keys() & data.keys():
        return data
    data = dict(data)
    for old, new in RENAMED.items():
        if old not in data:
            continue
        if new in data:
            raise ValueError(f"{old} and {new} are the same setting ({old} is its old name); keep only {new}")
        data[new] = data.pop(old)
        if old not in _warned:
            _warned.add(old)
            log.warning("policy setting %s is deprecated: rename it %s (same meaning)", old, new)
    return data


class ReactiveRules(_Strict):
    """The decision core's settings without a floor of their own (the tier's ``min`` is the floor): the
    reactive part of the predictive policy, and the body of the min-floor policy."""

    # Load one instance carries at the TTFT target (requests in flight: running + waiting). None: the prior
    # from the KV-cache math (`scalectl plan`), refined from the fleet's own TTFT-vs-load observations.
    capacity: float | None = Field(None, gt=0)
    learn_capacity: bool = True
    # The TTFT SLO: the ``ttft_quantile`` (p99 by default) held within it (default 500ms). Formerly
    # ``ttft_p95_max`` (still read, deprecated).
    ttft_max: Duration | None = None
    stabilization: Duration = Field(
        300.0, json_schema_extra=tunable(60, 900, step=30)
    )  # scale in only to the highest need over this window
    idle_after: Duration = Field(
        300.0, json_schema_extra=tunable(60, 1800, step=30)
    )  # no work at all this long: back to the floor at once
    scale_in_max_fraction: float = Field(
        0.5, gt=0, le=1, json_schema_extra=tunable(0.1, 1, step=0.1)
    )  # most of the fleet removed per scale_in_period
    scale_in_period: Duration = Field(60.0, json_schema_extra=tunable(15, 300, step=15))
    # The TTFT quantile held within the target. p99 by default: an SLO such as "99.5% of requests within
    # 500 ms" cannot be held by watching p95, which lets 5% of each window through unseen. Where the
    # source gives no p99, p95 stands in (it only sees the worse breaches) and the reason says p95.
    ttft_quantile: float = Field(0.99, json_schema_extra={"enum": list(TTFT_QUANTILES)})

    @model_validator(mode="before")
    @classmethod
    def _deprecated_names(cls, data: Any) -> Any:
        return renamed_settings(data)

    @field_validator("ttft_quantile")
    @classmethod
    def _a_quantile_vllm_reports(cls, value: float) -> float:
        if value not in TTFT_QUANTILES:
            raise ValueError(f"must be one of {', '.join(f'{q:g}' for q in TTFT_QUANTILES)} (got {value:g})")
        return value

    @property
    def ttft_target(self) -> float:
        """The TTFT the tier's ``ttft_quantile`` is held to: ``ttft_max``, else 500 ms."""
        return self.ttft_max if self.ttft_max is not None else DEFAULT_TTFT_TARGET_S


class MinFloorPolicy(ReactiveRules):
    """User-facing tiers: a warm floor, the decision core above it."""

    kind: Literal["min-floor"]
    floor: int = Field(1, ge=0)


class ScaleToZeroPolicy(_Strict):
    """Batch tiers: nothing while the queue is empty, ceil(depth / per-instance) once work waits."""

    kind: Literal["scale-to-zero"]
    queue_per_instance: float = Field(20, gt=0, json_schema_extra=tunable(1, 256, log=True))
    activate_after: Duration = Field(30.0, json_schema_extra=tunable(0, 300, step=5))
    idle_after: Duration = Field(300.0, json_schema_extra=tunable(30, 1800, step=30))
    # Every task starts within this: bursts are sized from the learned throughput per instance and boot
    # time at the fewest instance-seconds (docs/policies.md). None: ceil(depth / queue_per_instance).
    max_wait: Duration | None = Field(None, gt=0)


def cron_expression(value: str) -> str:
    """A 5-field cron expression croniter reads, or a ValueError that shows one."""
    from croniter import croniter

    if not croniter.is_valid(value):
        raise ValueError(f'expected a 5-field cron expression like "0 8 * * mon-fri", got {value!r}')
    return value


def iana_timezone(value: str) -> str:
    """An IANA time zone name zoneinfo knows, or a ValueError that shows one."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f'expected an IANA timezone like "America/New_York", got {value!r}') from exc
    return value


_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class ScheduleWindow(_Strict):
    """A known busy window: starts at each ``cron`` firing, ends at ``until`` (HH:MM, same day, local)."""

    cron: str
    until: str
    instances: int = Field(ge=0)
    timezone: str = "UTC"

    _cron_parses = field_validator("cron")(cron_expression)

    @field_validator("until")
    @classmethod
    def _until_is_hhmm(cls, value: Any) -> str:
        text = str(value)
        if not _HHMM.match(text):
            raise ValueError(f'expected a time of day like "18:00", got {value!r}')
        return text

    _timezone_exists = field_validator("timezone")(iana_timezone)


class PredictivePolicy(_Strict):
    kind: Literal["predictive"]
    headroom: float = Field(0.30, ge=0, le=10, json_schema_extra=tunable(0, 1, step=0.05))
    # How far ahead schedules and forecasts act. None: the tier's measured create→ready time (p90 of its
    # recent launches), 5 minutes until it has launched anything.
    lead_time: Duration | None = Field(None, json_schema_extra=tunable(60, 1800, step=30))
    schedule: list[ScheduleWindow] = Field(default_factory=list)
    reactive: ReactiveRules = Field(default_factory=lambda: ReactiveRules.model_validate({}))

    @model_validator(mode="before")
    @classmethod
    def _forecast_retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and "forecast" in data:
            raise ValueError(
                "`forecast` was retired with `mode: thresholds`: the decision core forecasts the tier's daily and "
                "weekly seasons and its recurring bursts from its own history; remove `forecast`"
            )
        return data

    @model_validator(mode="after")
    def _has_a_schedule(self) -> PredictivePolicy:
        if not self.schedule:
            raise ValueError(
                "a predictive policy needs a `schedule` list (without one, use `kind: min-floor`: the decision core "
                "forecasts the tier's seasons itself)"
            )
        return self


class ExternalPolicy(_Strict):
    """A user's own policy class, ``package.module:ClassName``, run exactly like a built-in one."""

    kind: Literal["external"]
    class_: str = Field(alias="class")
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("class_")
    @classmethod
    def _looks_like_import_path(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", value):
            raise ValueError(f'expected "package.module:ClassName", got {value!r}')
        return value


PolicySpec = Annotated[
    MinFloorPolicy | ScaleToZeroPolicy | PredictivePolicy | ExternalPolicy,
    Field(discriminator="kind"),
]
