"""How long the run's instances take to boot: the boot model (``scalectl.sizing.boot``) per provider and tier,
or the workload's ``cloud.provision_delay`` where it replaces the model.

The simulated clouds draw each instance's boot from here (machine up, then server answering); the
baselines use each tier's mean boot as their provisioning delay and the clairvoyant baseline draws the
boots it pays for. Every draw made for an instance is kept, per tier, for the report.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from scalectl.providers.base import LaunchSpec
from scalectl.providers.simulated.machines import SimInstance
from scalectl.simulator.workloads.spec import CloudSpec
from scalectl.sizing.boot import BootModel, BootParts, boot_model, resume_model
from scalectl.sizing.errors import SizingError
from scalectl.sizing.models import resolve_model
from scalectl.tiers.config import FleetConfig, TierSpec


class BootInputError(ValueError):
    """A tier whose boot cannot be modelled (its model is unknown); the message names the tier and the fix."""


def provider_type(config: FleetConfig, provider: str) -> str:
    """The type a provider name stands for (``simulated`` and ``local`` are their own type)."""
    entry = config.providers.get(provider)
    return entry.type if entry is not None else provider


def tier_boot(tier_name: str, tier: TierSpec, kind: str, spec: CloudSpec) -> BootModel:
    """The boot model of one tier's instances at a provider of type ``kind``."""
    try:
        model = resolve_model(tier.serving.model, tier.serving.config_json)
    except SizingError as exc:
        raise BootInputError(f'tier "{tier_name}": serving.model: {exc}') from None
    boot = spec.boot
    return boot_model(kind, tier.gpu_count, model, boot.path, boot.figures(), boot.provision_span())


@dataclass(frozen=True, slots=True)
class TierBoot:
    """One tier's boot as the baselines see it: the model at the tier's first provider, or the uniform
    ``provision_delay`` [low, high] that replaces it."""

    model: BootModel | None
    delay: tuple[float, float] | None = None

    def mean_s(self) -> float:
        if self.model is not None:
            return self.model.mean()
        assert self.delay is not None
        return (self.delay[0] + self.delay[1]) / 2

    def longest_s(self) -> float:
        if self.model is not None:
            return self.model.longest()
        assert self.delay is not None
        return self.delay[1]

    def draw_s(self, rng: random.Random) -> float:
        """One boot, in seconds (the clairvoyant baseline's)."""
        if self.model is not None:
            return self.model.draw(rng).total
        assert self.delay is not None
        return rng.uniform(*self.delay)


@dataclass(slots=True)
class Boots:
    """The run's boots: a model per (provider, tier), or the uniform ``provision_delay`` when given."""

    spec: CloudSpec
    models: dict[tuple[str, str], BootModel]  # (provider name, tier) -> model; empty with provision_delay
    first_provider: dict[str, str]  # tier -> its first provider (the baselines' boot)
    resumes: dict[tuple[str, str], BootModel] = field(default_factory=dict)  # (provider, tier) -> a start's model
    drawn: dict[str, list[BootParts]] = field(default_factory=dict)  # tier -> every boot drawn in the run
    resumed: dict[str, list[BootParts]] = field(default_factory=dict)  # tier -> every resume drawn in the run

    @classmethod
    def of(cls, config: FleetConfig, tiers: list[str], spec: CloudSpec) -> Boots:
        first = {name: config.tiers[name].providers[0] for name in tiers}
        if spec.provision_delay is not None:
            return cls(spec, {}, first)
        models = {
            (provider, name): tier_boot(name, config.tiers[name], provider_type(config, provider), spec)
            for name in tiers
            for provider in config.tiers[name].providers
        }
        resumes = {key: resume_model(model, provider_type(config, key[0])) for key, model in models.items()}
        return cls(spec, models, first, resumes=resumes)

    def tier(self, name: str) -> TierBoot:
        return TierBoot(self.models.get((self.first_provider[name], name)), self.spec.provision_delay)

    def tiers(self) -> dict[str, TierBoot]:
        return {name: self.tier(name) for name in self.first_provider}

    def longest_s(self) -> float:
        """The longest boot any instance of the run can draw (the warm-up before the workload covers it)."""
        if self.spec.provision_delay is not None:
            return self.spec.provision_delay[1]
        return max(m.longest() for m in self.models.values())

    def for_cloud(self, provider: str) -> ProviderBoots | None:
        """The simulated cloud's boot hook for one provider; None: the uniform ``provision_delay``."""
        if self.spec.provision_delay is not None:
            return None
        return ProviderBoots(self, provider)

    def resume_tier(self, name: str) -> BootModel | None:
        """A tier's start after a stop at its first provider (None with the uniform ``provision_delay``)."""
        return self.resumes.get((self.first_provider[name], name))

    def resume_for_cloud(self, provider: str) -> ProviderResumes | None:
        """The simulated cloud's resume hook for one provider; None: the cloud's uniform resume delay."""
        if self.spec.provision_delay is not None:
            return None
        return ProviderResumes(self, provider)


@dataclass(frozen=True, slots=True)
class ProviderBoots:
    """A provider's boots, drawn per instance: (machine up, server answering) seconds after create."""

    boots: Boots
    provider: str

    def __call__(self, spec: LaunchSpec, rng: random.Random) -> tuple[float, float]:
        model = self.boots.models.get((self.provider, spec.tier))
        if model is None:  # a tier the workload does not load: it boots as the provider's first tier would
            model = next(m for (p, _), m in self.boots.models.items() if p == self.provider)
        parts = model.draw(rng)
        self.boots.drawn.setdefault(spec.tier, []).append(parts)
        return parts.provision, parts.total


@dataclass(frozen=True, slots=True)
class ProviderResumes:
    """A stopped machine's start, drawn per start (``sizing.boot.resume_model``): the provider type's start
    (not its create), then the cached path: no image pull, no weights download (the stopped disk holds
    both); loading the weights from that disk into the GPUs, the cached compile and the warm-up remain."""

    boots: Boots
    provider: str

    def __call__(self, inst: SimInstance, rng: random.Random) -> tuple[float, float]:
        model = self.boots.resumes.get((self.provider, inst.tier))
        if model is None:
            model = next(m for (p, _), m in self.boots.resumes.items() if p == self.provider)
        parts = model.draw(rng)
        self.boots.resumed.setdefault(inst.tier, []).append(parts)
        return parts.provision, parts.total


def boot_summary(boots: Boots, tiers: Mapping[str, object]) -> dict[str, dict[str, float | int | str]]:
    """Per tier: the model's p50/p95 and mean, and what the run's instances drew (count, mean)."""
    out: dict[str, dict[str, float | int | str]] = {}
    for name in tiers:
        model = boots.tier(name).model
        if model is None:
            continue
        p50, p95 = model.quantiles(0.5, 0.95)
        drawn = boots.drawn.get(name, [])
        entry: dict[str, float | int | str] = {"path": model.path, "p50_s": p50, "p95_s": p95, "mean_s": model.mean()}
        entry["drawn"] = len(drawn)
        if drawn:
            entry["drawn_mean_s"] = sum(p.total for p in drawn) / len(drawn)
        resume = boots.resume_tier(name)
        if resume is not None:  # a start after a stop (a warm pool's): the same parts but the start, cached
            entry["resume_p50_s"], entry["resume_p95_s"] = resume.quantiles(0.5, 0.95)
        out[name] = entry
    return out


def timeout_warnings(boots: Boots, config: FleetConfig, tiers: Mapping[str, object]) -> list[str]:
    """A tier whose boots often outlast its own timeouts: the reconciler replaces them before they serve
    (``launch_timeout`` until the machine runs, ``bootstrap_timeout`` until the server answers)."""
    lines = []
    for name in tiers:
        model = boots.tier(name).model
        if model is None:
            continue
        spec = config.tiers[name]
        (p95,) = model.quantiles(0.95)
        if p95 > spec.bootstrap_timeout:
            lines.append(
                f"tier {name}: its boot's p95 ({p95 / 60:.1f} min, {model.path} path) is past its bootstrap_timeout "
                f"({spec.bootstrap_timeout / 60:g} min): such boots are replaced before they serve; raise "
                "bootstrap_timeout, or cache the image and weights (cloud.boot.path: cached)"
            )
        if model.provision.high > spec.launch_timeout:
            lines.append(
                f"tier {name}: provisioning can take {model.provision.high / 60:g} min, past its launch_timeout "
                f"({spec.launch_timeout / 60:g} min): raise launch_timeout"
            )
    return lines
