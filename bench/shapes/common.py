"""What every shape generator shares: the hardware, the scales, how a peak is aimed at a fleet, and the
files a generator returns."""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from bench.bench_heldout import AIM_UTILISATION, HARDWARE, LLAMA_8B, Hardware

ROOT = Path(__file__).resolve().parents[2]


def _traces() -> Path:
    """$SCALECTL_TRACES, else the shared traces folder beside the repository (or beside a folder that holds
    it: a git worktree)."""
    if os.environ.get("SCALECTL_TRACES"):
        return Path(os.environ["SCALECTL_TRACES"])
    beside = [folder / "shared" / "traces" for folder in ROOT.parents]
    return next((p for p in beside if p.is_dir()), beside[0])


TRACES = _traces()

# The GPUs a shape can be served on (bench/bench_heldout.py's catalogue of drawn hardware): the 8B FP8 on an
# H100 by default; the 8B on an A100 or L40S; the 70B on two H100s.
GPUS: dict[str, Hardware] = {key: HARDWARE[key] for key in ("h100-8b", "a100-8b", "l40s-8b", "2xh100-70b")}
# Instances a shape is aimed at, at its busiest moment (the oracle reports what it really needs).
SCALES = {"small": 4, "medium": 12, "large": 32}
# A tier's `max` is this many times the aimed peak (at least MIN_MAX): room for the policy to overshoot.
MAX_OVER_AIM = 2.0
MIN_MAX = 8
# The largest `max` the suite gives a tier: larger fleets take the simulator tens of minutes per hour.
MAX_INSTANCES = 256
MIN_RATE = 1 / 3600  # requests per second: below one an hour there is nothing to scale


class ShapeError(ValueError):
    """A shape that cannot be generated as asked; the message names the family, the scale and the fix."""


@dataclass(frozen=True)
class ShapeFiles:
    """One generated shape: the tiers file and the workload file of one run, and what was aimed at."""

    family: str
    scale: str
    gpu: str
    seed: int
    tiers_yaml: str
    workload_yaml: str
    peak_rate: float  # requests (batch: tasks) per second at the busiest moment
    aimed_instances: int  # what the peak was aimed at
    summary: str

    @property
    def name(self) -> str:
        return f"{self.family}-{self.scale}-{self.gpu}-{self.seed}"

    def write(self, folder: Path) -> tuple[Path, Path]:
        """Write ``<name>.tiers.yaml`` and ``<name>.yaml`` into ``folder``; returns (tiers, workload)."""
        folder.mkdir(parents=True, exist_ok=True)
        tiers, workload = folder / f"{self.name}.tiers.yaml", folder / f"{self.name}.yaml"
        tiers.write_text(self.tiers_yaml, encoding="utf-8")
        workload.write_text(self.workload_yaml, encoding="utf-8")
        return tiers, workload


def hardware(family: str, gpu: str) -> Hardware:
    if gpu not in GPUS:
        raise ShapeError(f"{family}: unknown gpu {gpu!r}; choose from {', '.join(GPUS)}")
    return GPUS[gpu]


def aimed_instances(family: str, scale: str | float) -> float:
    """The instances a scale aims the busiest moment at: a named scale, or a number of instances."""
    if isinstance(scale, str) and scale in SCALES:
        return float(SCALES[scale])
    try:
        value = float(scale)
    except ValueError:
        raise ShapeError(
            f"{family}: unknown scale {scale!r}; choose from {', '.join(SCALES)} or give a number of instances"
        ) from None
    if not value > 0 or not math.isfinite(value):
        raise ShapeError(f"{family}: scale {scale!r} must be a number of instances above 0")
    return value


def tier_max(family: str, scale: str | float, aimed: float) -> int:
    """The tier's `max`; refuses a fleet larger than the suite runs."""
    top = max(MIN_MAX, math.ceil(MAX_OVER_AIM * aimed))
    if top > MAX_INSTANCES:
        raise ShapeError(
            f"{family}: scale {scale!r} aims at {aimed:g} instances at peak, which needs a tier max of {top}; "
            f"the suite's tiers go up to {MAX_INSTANCES} instances (the largest scale it serves is "
            f"{MAX_INSTANCES / MAX_OVER_AIM:g} instances): choose a smaller scale"
        )
    return top


def check_rate(family: str, scale: str | float, rate: float, what: str = "requests") -> None:
    if rate < MIN_RATE:
        raise ShapeError(
            f"{family}: scale {scale!r} gives {rate * 3600:.3g} {what} per hour at peak, below one an hour: "
            "nothing to scale; choose a larger scale"
        )


def rate_for(hw: Hardware, instances: float, tokens_per_request: float) -> float:
    """Requests per second that keep ``instances`` at the suite's aimed share of their compute."""
    return instances * hw.tokens_per_instance * AIM_UTILISATION / tokens_per_request


def rng_for(family: str, seed: int) -> random.Random:
    """A family's draws depend on the seed only: scales and GPUs of one seed share them."""
    return random.Random(f"shapes/{family}/{seed}")


def local_start(day: str, clock: str, timezone: str) -> str:
    """``day`` (YYYY-MM-DD) at ``clock`` (HH:MM) local time in ``timezone``, as an ISO time with offset."""
    naive = datetime.fromisoformat(f"{day}T{clock}:00")
    return naive.replace(tzinfo=ZoneInfo(timezone)).isoformat()


def serving_tier(hw: Hardware, top: int, ttft_ms: int, max_model_len: int | None = None) -> dict[str, Any]:
    """What a new user writes for a user-facing tier: GPU and model, bounds, the policy's defaults with
    a floor of 2 and the TTFT target."""
    tier: dict[str, Any] = {"capacity": "on-demand", "gpu": hw.gpu}
    if hw.gpu_count > 1:
        tier["gpu_count"] = hw.gpu_count
    tier |= {"providers": ["simulated"], "min": 1, "max": top,
             "policy": {"kind": "min-floor", "floor": 2, "ttft_max": f"{ttft_ms}ms"}}  # fmt: skip
    serving: dict[str, Any] = {}
    if hw.model != LLAMA_8B:
        serving["model"] = hw.model
    if max_model_len is not None:
        serving["max_model_len"] = max_model_len
    if serving:
        tier["serving"] = serving
    return tier


def dump(data: dict[str, Any], header: str) -> str:
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return comment + yaml.safe_dump(data, sort_keys=False, width=120)


def round_up(tokens: int, step: int = 1024) -> int:
    return -(-tokens // step) * step
