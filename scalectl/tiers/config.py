"""Fleet configuration (tiers.yaml): schema, loading, and errors that name file, tier, field and fix."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scalectl.policies.durations import Duration
from scalectl.policies.registry import KINDS
from scalectl.policies.spec import PolicySpec, ReactiveRules
from scalectl.providers.registry import UnknownProviderType, capabilities_of, check_options
from scalectl.sizing.errors import SizingError, UnknownModel
from scalectl.sizing.gpus import UnknownGpu, gpu_info, normalize_gpu
from scalectl.sizing.models import lookup_model
from scalectl.sizing.spec import ServingSpec
from scalectl.sizing.vllm_args import tune_vllm_args
from scalectl.sources.spec import SignalsSpec
from scalectl.tiers.disruption import DisruptionWindow, parse_budget
from scalectl.tiers.errors import ConfigError
from scalectl.tiers.yaml_bounded import TooDeep, safe_load

# Provider types that work with no configuration block of their own.
IMPLICIT_PROVIDERS = ("simulated", "local")
_TIER_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ProviderEntry(_Strict):
    """An account at a provider. Credentials come from env or a file, never from this file."""

    type: str
    base_url: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _options_fit_the_type(self) -> ProviderEntry:
        check_options(self.type, self.options)  # ValueError -> 'provider "x": <what to fix>'
        return self


class ActivatorSpec(_Strict):
    """Scale-from-zero over HTTP (docs/routing.md): while the tier has no ready instance, its route goes to the
    daemon's activator, which holds each request (at most ``max_held``, each at most ``max_wait``), counts it
    as load so the tier starts at once, and hands it to the first ready instance. It applies where the daemon
    routes the tier (``SCALECTL_ROUTING=nginx`` and the tier in ``SCALECTL_ROUTING_LISTEN``)."""

    enabled: bool = True
    max_held: int = Field(100, ge=1, le=100_000)  # requests held at once; more get 503 with Retry-After
    max_wait: Duration = Field(300.0, gt=0)  # a request not handed to an instance by then gets 503
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)  # larger: 413, never buffered


AUTO = "auto"  # warm_pool.size: sized from the decision core's forecast error (controller/reconciler/pool_size.py)


class WarmPoolSpec(_Strict):
    """Stopped machines kept beside the tier (docs/configuration.md, "warm_pool"): the pool fills by creating
    members that boot once and stop (``fill``), and an instance that served is stopped instead of deleted on
    scale-in while the pool holds fewer than ``size``; scale-out starts pool members before it creates.
    ``size: auto`` sizes the pool from the decision core's forecast error at the cold-boot horizon, within
    ``max`` (default: the tier's max). ``max``: the most members kept (more are deleted);
    ``resume_timeout``: a started member not serving by then is deleted and a fresh create takes its place."""

    size: int | Literal["auto"]
    max: int | None = Field(None, ge=0, le=1000)  # default: size (auto: the tier's max)
    resume_timeout: Duration = Field(300.0, gt=0)
    fill: bool = True  # create members to fill the pool (false: it fills only from scale-in)

    @field_validator("size", mode="before")
    @classmethod
    def _a_count_or_auto(cls, value: Any) -> Any:
        if value == AUTO or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1000):
            return value
        raise ValueError(f"expected a number of stopped instances (0-1000) or `auto`, got {value!r}")

    @model_validator(mode="after")
    def _size_within_max(self) -> WarmPoolSpec:
        if isinstance(self.size, int) and self.max is not None and self.size > self.max:
            raise ValueError(f"size ({self.size}) is above its max ({self.max}); set warm_pool.size <= warm_pool.max")
        return self

    @property
    def auto(self) -> bool:
        return self.size == AUTO

    @property
    def most(self) -> int:
        """The most stopped members kept (``size: auto`` always has a max: the tier's, when not set)."""
        if self.max is not None:
            return self.max
        assert isinstance(self.size, int), "size: auto gets its max from the tier when parsed"
        return self.size

    @property
    def fixed_size(self) -> int | None:
        """The configured size; None for ``auto`` (sized each tick)."""
        return self.size if isinstance(self.size, int) else None


class Variant(_Strict):
    """Other hardware that can serve the tier's model (docs/configuration.md, "variants")."""

    gpu: str
    gpu_count: int = Field(1, ge=1, le=16)

    @field_validator("gpu")
    @classmethod
    def _gpu_in_the_catalogue(cls, value: str) -> str:
        try:
            return normalize_gpu(value)
        except UnknownGpu as exc:
            raise ValueError(f"{exc}; set the variant's `gpu:` to one of them") from None

    @property
    def label(self) -> str:
        return f"{self.gpu_count}× {self.gpu}"


class TierSpec(_Strict):
    capacity: Literal["on-demand", "spot"]
    fallback: Literal["on-demand"] | None = None
    gpu: str
    gpu_count: int = Field(1, ge=1, le=16)
    providers: list[str] = Field(min_length=1)
    regions: list[str] = Field(default_factory=list)
    min: int = Field(ge=0)
    max: int = Field(ge=0)
    budget_per_hour: float | None = Field(None, gt=0)
    policy: PolicySpec
    signals: SignalsSpec = Field(default_factory=SignalsSpec)
    serving: ServingSpec = Field(default_factory=ServingSpec)
    launch_timeout: Duration = 300.0  # no provider instance by then: replace (Karpenter: 5 min)
    bootstrap_timeout: Duration = 900.0  # not serving by then: replace (Karpenter: 15 min)
    drain_timeout: Duration = 120.0
    # Extra instances in a rollout step; fallbacks handed back to spot at once: at least this many (0: drain first)
    max_surge: int = Field(1, ge=0, le=16)
    on_demand_base: int = Field(0, ge=0)  # spot tiers: this many instances always on-demand (SkyServe's base)
    fallback_after: Duration = 0.0  # spot tiers: wait this long for spot before falling back to on-demand
    # Voluntary disruptions at once (scale-in, rollouts' drain-first steps, hand-backs to spot, which default
    # to 25%): a count, or "25%" of the fleet.
    max_disrupted: int | float | None = None
    # Scheduled budgets that override max_disrupted while open (e.g. 0 during business hours): tiers/disruption.py
    disruption_windows: tuple[DisruptionWindow, ...] = ()
    activator: ActivatorSpec = Field(default_factory=ActivatorSpec)
    warm_pool: WarmPoolSpec | None = None
    # Other hardware that can serve the model; placement fills the needed capacity with the cheapest
    # capacity per dollar across them and the primary (controller/reconciler/placement.py).
    variants: tuple[Variant, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _auto_pool_within_the_tiers_max(cls, data: Any) -> Any:
        """``warm_pool: {size: auto}`` without a max is capped by the tier's max."""
        if isinstance(data, dict):
            pool = data.get("warm_pool")
            if isinstance(pool, dict) and pool.get("size") == AUTO and pool.get("max") is None:
                return {**data, "warm_pool": {**pool, "max": data.get("max")}}
        return data

    @field_validator("gpu")
    @classmethod
    def _gpu_in_the_catalogue(cls, value: str) -> str:
        """A GPU the catalogue does not know would fail every tick (prices, sizing): refused here instead."""
        try:
            normalize_gpu(value)
        except UnknownGpu as exc:
            raise ValueError(f"{exc}; set `gpu:` to one of them (`scalectl plan` lists what fits)") from None
        return value

    @field_validator("max_disrupted", mode="before")
    @classmethod
    def _disruption_budget(cls, value: Any) -> Any:
        return None if value is None else parse_budget(value, allow_zero=False)

    @model_validator(mode="after")
    def _bounds_make_sense(self) -> TierSpec:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max}); set min <= max")
        if self.fallback and self.capacity != "spot":
            raise ValueError("fallback: on-demand only applies to capacity: spot")
        if self.on_demand_base and self.capacity != "spot":
            raise ValueError("on_demand_base only applies to capacity: spot (an on-demand tier is all on-demand)")
        if self.on_demand_base > self.max:
            raise ValueError(f"on_demand_base ({self.on_demand_base}) is above max ({self.max}); lower it")
        if self.fallback_after and self.fallback is None:
            raise ValueError("fallback_after needs fallback: on-demand (there is nothing to fall back to)")
        floor = getattr(self.policy, "floor", None)
        if floor is not None and floor > self.max:
            raise ValueError(f"policy.floor ({floor}) is above max ({self.max}); lower the floor or raise max")
        pool = self.warm_pool
        if pool is not None and pool.most > self.max:
            field = "size" if pool.max is None else "max"
            raise ValueError(
                f"warm_pool.{field} ({pool.most}) is above the tier's max ({self.max}); a pool holds at most "
                f"the tier's max: lower warm_pool.{field} or raise max"
            )
        if pool is not None and pool.auto and not _decision_core(self.policy):
            raise ValueError(
                "warm_pool.size: auto sizes the pool from the decision core's forecast error, and this tier's "
                "policy has none (only min-floor and predictive in target mode, the default, forecast); set a "
                "number of stopped instances, e.g. `size: 2`"
            )
        self._variants_hold_the_model()
        if pool is not None and self.capacity == "spot":
            raise ValueError(
                "warm_pool needs capacity: on-demand (RunPod, EC2 and the simulated cloud cannot stop spot "
                "machines, and a stopped Vast.ai bid reads like an outbid one); remove warm_pool or use "
                "capacity: on-demand"
            )
        return self

    def _variants_hold_the_model(self) -> None:
        """Each variant must serve the model as ``scalectl vllm-args`` would tune it there: a variant that
        cannot hold it would fail every launch placed on it."""
        if not self.variants:
            return
        from scalectl.sizing.variants import capacity_units  # the engine model (numpy): only tiers with variants

        primary = (normalize_gpu(self.gpu), self.gpu_count)
        try:
            tune_vllm_args(self.serving, *primary)
        except UnknownModel as exc:
            raise ValueError(
                f"variants: cannot size serving.model ({exc}); variants are counted by the engine model, which "
                "needs a model the catalogue knows or serving.config_json; set one, or remove `variants:`"
            ) from None
        except SizingError as exc:
            raise ValueError(
                f"variants: are counted in instances of the tier's own gpu, which cannot serve the model "
                f"({exc}); fix gpu/gpu_count first, or remove `variants:`"
            ) from None
        seen = {primary}
        for i, variant in enumerate(self.variants):
            where = f"variants[{i}] ({variant.label})"
            if (variant.gpu, variant.gpu_count) in seen:
                same = "the tier's own gpu/gpu_count" if (variant.gpu, variant.gpu_count) == primary else "listed twice"
                raise ValueError(f"{where}: {same}; remove it")
            seen.add((variant.gpu, variant.gpu_count))
            try:
                tune_vllm_args(self.serving, variant.gpu, variant.gpu_count)
                capacity_units(self.serving, variant.gpu, variant.gpu_count, *primary)
            except SizingError as exc:
                raise ValueError(
                    f"{where} cannot hold the model: {exc}. Fix the variant (a larger GPU or a higher "
                    "gpu_count; `scalectl plan` lists what fits) or remove it from `variants:`"
                ) from None

    @property
    def hardware(self) -> tuple[tuple[str, int], ...]:
        """(GPU, GPUs per instance) the tier may run on: its own first, then its variants, canonical names."""
        return ((_canonical(self.gpu), self.gpu_count), *((v.gpu, v.gpu_count) for v in self.variants))

    def on(self, gpu: str, gpu_count: int) -> TierSpec:
        """The tier as served on one of its variants (its servers tuned for that GPU): the same tier when it
        is the tier's own hardware."""
        if not self.variants or (_canonical(gpu), gpu_count) == self.hardware[0]:
            return self
        return self.model_copy(update={"gpu": gpu, "gpu_count": gpu_count, "variants": ()})

    def capacity_units(self, gpu: str, gpu_count: int) -> float:
        """What one instance on ``gpu_count``× ``gpu`` is worth in instances of the tier's own hardware
        (``scalectl.sizing.variants``); 1.0 for a tier without variants, and for its own hardware."""
        if not self.variants:  # the usual case, asked per offer and per instance every tick: nothing to look up
            return 1.0
        gpu = _canonical(gpu)
        if (gpu, gpu_count) == self.hardware[0]:
            return 1.0
        from scalectl.sizing.variants import capacity_units  # the engine model (numpy): only tiers with variants

        own, count = self.hardware[0]
        return capacity_units(self.serving, gpu, gpu_count, own, count)

    def catalogue_price_per_hour(self) -> float | None:
        """$/hour for one instance at the catalogue price × gpu_count (the spot price for spot tiers when the
        catalogue has one); None for a GPU the catalogue does not know."""
        try:
            info = gpu_info(self.gpu)
        except UnknownGpu:
            return None
        spot = info.spot_per_hour if self.capacity == "spot" else None
        return (spot if spot is not None else info.on_demand_per_hour) * self.gpu_count

    @property
    def user_facing(self) -> bool:
        """Serves people (a latency target), as opposed to a batch queue: planned first under a fleet budget."""
        return self.policy.kind != "scale-to-zero"


def _decision_core(policy: Any) -> bool:
    """The tier's policy is the decision core (min-floor, predictive): it measures the forecast error ``auto`` reads."""
    return isinstance(getattr(policy, "reactive", policy), ReactiveRules)


class FleetConfig(_Strict):
    tiers: dict[str, TierSpec] = Field(min_length=1)
    providers: dict[str, ProviderEntry] = Field(default_factory=dict)
    # A hard cap on what the whole fleet bills per hour, across tiers (each tier's own budget still holds).
    budget_per_hour: float | None = Field(None, gt=0)

    @field_validator("tiers")
    @classmethod
    def _tier_names(cls, tiers: dict[str, TierSpec]) -> dict[str, TierSpec]:
        for name in tiers:
            if not _TIER_NAME.match(name):
                raise ValueError(f'tier name "{name}" must be lowercase letters, digits and dashes (at most 40 chars)')
        return tiers

    @model_validator(mode="after")
    def _providers_known(self) -> FleetConfig:
        for tier_name, tier in self.tiers.items():
            for provider in tier.providers:
                if provider not in self.providers and provider not in IMPLICIT_PROVIDERS:
                    known = ", ".join(sorted(set(self.providers) | set(IMPLICIT_PROVIDERS)))
                    raise ValueError(
                        f'tier "{tier_name}": providers: unknown provider "{provider}"; '
                        f"add it under the top-level `providers:` block or use one of: {known}"
                    )
        return self

    @model_validator(mode="after")
    def _warm_pools_can_stop(self) -> FleetConfig:
        """A warm pool needs a provider that can stop and start a machine (docs/providers/README.md, "Boot
        paths"); a tier none of whose providers can would keep a pool nobody fills."""
        for tier_name, tier in self.tiers.items():
            if tier.warm_pool is None:
                continue
            able = [p for p in tier.providers if _stops(self._type_of(p))]
            if not able:
                names = ", ".join(f"{p} ({self._type_of(p)})" for p in tier.providers)
                raise ValueError(
                    f'tier "{tier_name}": warm_pool: none of the tier\'s providers can stop and start an instance '
                    f"({names}); list a provider that can (runpod, vastai, aws, simulated) or remove warm_pool"
                )
        return self

    def _type_of(self, provider: str) -> str:
        entry = self.providers.get(provider)
        return entry.type if entry is not None else provider

    @model_validator(mode="after")
    def _fleet_budget_covers_the_floors(self) -> FleetConfig:
        """A fleet budget that cannot pay for every tier's ``min`` would starve some floor on the first tick:
        refused here, with what the floors cost (catalogue prices; a live price above them is reported when
        it binds)."""
        if self.budget_per_hour is None:
            return self
        floors = {name: (tier.min, tier.catalogue_price_per_hour()) for name, tier in self.tiers.items() if tier.min}
        cost = sum(n * price for n, price in floors.values() if price is not None)
        if cost > self.budget_per_hour + 1e-9:
            parts = ", ".join(f"{name} {n} × ${price:g}" for name, (n, price) in sorted(floors.items()) if price)
            raise ValueError(
                f"budget_per_hour: ${self.budget_per_hour:g}/h is below what the tiers' floors cost at catalogue "
                f"prices (${cost:g}/h: {parts}); raise budget_per_hour or lower a tier's min"
            )
        return self


def _canonical(gpu: str) -> str:
    """The catalogue's name for a GPU spelling; an unknown one as written."""
    try:
        return normalize_gpu(gpu)
    except UnknownGpu:
        return gpu


def _stops(provider_type: str) -> bool:
    """Whether an adapter type declares stop/start (unknown types fail elsewhere, with their own message; an
    adapter whose extra is not installed, e.g. boto3 for aws, is given the benefit of the doubt: building it
    fails later and names the extra)."""
    try:
        return capabilities_of(provider_type).stop_start
    except UnknownProviderType:
        return False
    except ImportError:
        return True


def _format_location(loc: tuple[Any, ...], data: Any) -> str:
    """('tiers', 'research', 'policy', 'scale-to-zero', 'idle_after') -> 'tier "research": policy.idle_after'."""
    parts = list(loc)
    prefix = ""
    if len(parts) >= 2 and parts[0] == "tiers":
        prefix = f'tier "{parts[1]}": '
        parts = parts[2:]
    elif len(parts) >= 2 and parts[0] == "providers":
        prefix = f'provider "{parts[1]}": '
        parts = parts[2:]
    if len(parts) >= 2 and parts[0] in ("policy",) and isinstance(parts[1], str) and parts[1] in KINDS:
        del parts[1]  # the discriminator tag pydantic inserts
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith("function-") or part in ("constrained-str", "literal"):
            continue
        else:
            path += f".{part}" if path else str(part)
    return prefix + (f"{path}: " if path else "")


def _format_validation_error(exc: ValidationError, data: Any) -> list[str]:
    problems = []
    for err in exc.errors():
        where = _format_location(tuple(err["loc"]), data)
        message = err["msg"]
        message = re.sub(r"^(Value error|Assertion failed), ", "", message)
        if err["type"] == "extra_forbidden":
            message = "unknown field; remove it or check its spelling (see docs/configuration.md)"
        elif err["type"] == "union_tag_invalid":
            kinds = "min-floor, scale-to-zero, predictive, external"
            message = f"unknown policy kind {err.get('input', {}).get('kind')!r}; expected one of: {kinds}"
        elif err["type"] == "union_tag_not_found":
            message = "missing `kind`; expected one of: min-floor, scale-to-zero, predictive, external"
        elif err["type"] == "missing":
            message = "required field is missing"
        elif "input" in err and err["type"] not in ("value_error",) and not isinstance(err["input"], dict):
            message = f"{message}, got {err['input']!r}"
        problems.append(f"{where}{message}")
    return problems


def _cross_field_problems(data: Mapping[str, Any]) -> list[str]:
    """The checks that pydantic runs only once every field of a model is valid (unknown providers, min above
    max), done on the raw data so that one run reports every problem, not one layer per run."""
    problems: list[str] = []
    declared = data.get("providers")
    known = set(declared) if isinstance(declared, Mapping) else set()
    known |= set(IMPLICIT_PROVIDERS)
    tiers = data.get("tiers")
    for name, tier in tiers.items() if isinstance(tiers, Mapping) else ():
        if not isinstance(tier, Mapping):
            continue
        providers = tier.get("providers")
        for provider in providers if isinstance(providers, list) else ():
            if isinstance(provider, str) and provider not in known:
                problems.append(
                    f'tier "{name}": providers: unknown provider "{provider}"; add it under the top-level '
                    f"`providers:` block or use one of: {', '.join(sorted(known))}"
                )
        low, high = tier.get("min"), tier.get("max")
        if type(low) is int and type(high) is int and low > high:
            problems.append(f'tier "{name}": min ({low}) is above max ({high}); set min <= max')
    return problems


def parse_config(text: str, source: str = "<config>") -> FleetConfig:
    """Parse and validate YAML text. Raises ConfigError naming ``source``, tier and field — every problem
    of the file at once."""
    try:
        data = safe_load(text)
    except TooDeep as exc:
        raise ConfigError(source, [str(exc)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [f"{where}invalid YAML: {problem}"]) from None
    if not isinstance(data, Mapping) or "tiers" not in data:
        raise ConfigError(source, ["expected a mapping with a top-level `tiers:` key"])
    data = _without_read_only(data, source)
    try:
        return FleetConfig.model_validate(data)
    except ValidationError as exc:
        problems = _format_validation_error(exc, data)
        problems += [p for p in _cross_field_problems(data) if p not in problems]
        raise ConfigError(source, problems) from None


def _without_read_only(data: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    """`scalectl get tiers -o yaml|json` prints the stored version beside the configuration; applying that
    output back is allowed, and the version (read-only: the store numbers what it stores) is ignored."""
    if "version" not in data:
        return data
    version = data["version"]
    if version is not None and (type(version) is not int or version < 1):
        raise ConfigError(
            source,
            [f"version: expected the stored version `scalectl get tiers` printed (read-only), got {version!r}"],
        )
    return {k: v for k, v in data.items() if k != "version"}


def load_config(path: str | Path) -> tuple[FleetConfig, str]:
    """Read and validate a tiers file; returns the config and its text (stored verbatim on apply)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(p), [f"cannot read the file: {exc.strerror}"]) from None
    return parse_config(text, str(p)), text


def model_warnings(fleet: FleetConfig, source: str) -> list[str]:
    """Tiers serving a model the catalogue lacks, with no config.json: allowed (an in-house model launches
    with plain vLLM arguments) but said at `diff`/`apply`, with the closest catalogue names for a typo."""
    warnings = []
    for name, tier in sorted(fleet.tiers.items()):
        if tier.serving.config_json is None:
            try:
                lookup_model(tier.serving.model)
            except UnknownModel as exc:
                warnings.append(
                    f'{source}: tier "{name}": serving.model: {exc}. It will launch with untuned vLLM arguments.'
                )
    return warnings


def config_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
