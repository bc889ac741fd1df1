"""The shape families: each a function (seed, scale, gpu, hours) -> ShapeFiles (a tiers file and a workload
file). The seed draws what varies within a family (time zone, levels, when a surge comes, prompt sizes,
the arrivals); the scale sets the busiest moment's rate (aimed at that many instances); the GPU what serves
it. ``hours`` shortens a run to a window placed on the family's busy part (None: the family's full length).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from bench.bench_heldout import TIMEZONES, TRACE_INSTANCES_PER_SCALE
from bench.shapes.common import (
    GPUS,
    TRACES,
    ShapeError,
    ShapeFiles,
    aimed_instances,
    check_rate,
    dump,
    hardware,
    local_start,
    rate_for,
    rng_for,
    round_up,
    serving_tier,
    tier_max,
)
from scalectl.simulator.workloads.traces import read_trace

Generator = Callable[[int, "str | float", str, "float | None"], ShapeFiles]
MONDAY = "2026-03-16"
TARGETS_MS = (500, 600, 800, 1000, 1500, 2000, 3000, 5000)  # a target is raised along these until prompts fit
PREFILL_SHARE = 0.5  # a target leaves at least half of itself to queueing: the prompt's prefill takes the rest
# Instances Mooncake's busiest minute needs per copy of the trace on an H100 with the 8B at its 3 s target:
# the oracle's 2 at x0.39 (seed 677330, 07:00-10:00 Berlin; coarse, re-measure at a larger scale). Aimed from
# its mean tokens (1.5 per copy) at 1.5 s, a "small" day needed 27 instances under a max of 8.
MOONCAKE_INSTANCES_PER_SCALE = 5.1


def _target(hw_tokens: float, prompt_tokens: float, base_ms: int) -> int:
    """``base_ms``, raised until ``prompt_tokens`` (a high percentile) prefills on an idle instance within
    PREFILL_SHARE of it: a user sets a target their prompts can meet."""
    prefill_ms = 1000 * prompt_tokens / hw_tokens
    return next((t for t in TARGETS_MS if t >= base_ms and prefill_ms <= PREFILL_SHARE * t), TARGETS_MS[-1])


def _lognormal_p95(mean: float, cv: float, cap: int) -> float:
    sigma = math.sqrt(math.log(1 + cv * cv))
    return min(cap, mean / math.sqrt(1 + cv * cv) * math.exp(1.645 * sigma))


def _duration(hours: float | None, full: float, family: str) -> float:
    if hours is None:
        return full
    if not hours > 0:
        raise ShapeError(f"{family}: hours must be above 0, got {hours!r}")
    return hours


# ---- open-loop Poisson families --------------------------------------------------------------------------
def _tokens(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """API-style prompts (mean 800-2,000 tokens) and answers (150-350)."""
    mean_in, mean_out = rng.randint(8, 20) * 100, rng.randint(6, 14) * 25
    return ({"mean": mean_in, "cv": 0.6, "max": 4000}, {"mean": mean_out, "cv": 0.6, "max": 1024})


def _poisson(
    family: str,
    seed: int,
    scale: str | float,
    gpu: str,
    *,
    start: str,
    hours: float,
    shape: list[dict[str, Any]],
    peak_share: float,
    tokens: tuple[dict[str, Any], dict[str, Any]],
    base_ms: int,
    what: str,
) -> ShapeFiles:
    """A Poisson tier whose busiest moment (``peak_share`` × ``rate``) is aimed at the scale's instances."""
    hw = hardware(family, gpu)
    aimed = aimed_instances(family, scale)
    top = tier_max(family, scale, aimed)
    input_tokens, output_tokens = tokens
    peak_rate = rate_for(hw, aimed, input_tokens["mean"] + output_tokens["mean"])
    check_rate(family, scale, peak_rate)
    rate = round(peak_rate / peak_share, 4)
    p95 = _lognormal_p95(input_tokens["mean"], input_tokens["cv"], input_tokens["max"])
    ttft = _target(hw.tokens_per_instance, p95, base_ms)
    load = {"kind": "poisson", "rate": rate, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "ttft_target": f"{ttft}ms", "shape": shape}  # fmt: skip
    limit = round_up(input_tokens["max"] + output_tokens["max"])
    workload = {"seed": seed, "start": start, "duration": f"{hours:g}h", "tiers": {"api": load}}
    tiers = {"tiers": {"api": serving_tier(hw, top, ttft, limit if limit > 4096 else None)}}
    summary = f"{what}; {peak_rate:.1f} req/s at peak, prompts {input_tokens['mean']}, TTFT {ttft} ms"
    header = f"bench/shapes {family}, scale {scale}, {gpu}, seed {seed}: {summary}"
    return ShapeFiles(family, str(scale), gpu, seed, dump(tiers, header), dump(workload, header), peak_rate,
                      math.ceil(aimed), summary)  # fmt: skip


def _business_points(rng: random.Random) -> list[list[Any]]:
    """A business day in local time: night level, a 2 h ramp from 07:00, a lunch dip, an evening fall."""
    night = round(rng.uniform(0.05, 0.15), 2)
    dip = round(rng.uniform(0.65, 0.9), 2)
    fall = rng.randint(16, 18)
    return [["06:00", night], ["07:00", night], ["09:00", 1.0], ["11:45", 1.0], ["12:15", dip], ["13:15", dip],
            ["13:45", 1.0], [f"{fall}:00", 1.0], [f"{fall + 1}:00", 0.5], [f"{fall + 3}:00", night]]  # fmt: skip


def business_day(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """One weekday (Monday): ramp, lunch dip, evening fall, one unannounced ×1.2-1.5 step in the afternoon.
    Short runs start at 07:00 local (the morning ramp)."""
    family = "business-day"
    rng = rng_for(family, seed)
    tz = rng.choice(TIMEZONES)
    duration = _duration(hours, 24.0, family)
    start_clock = "00:00" if duration >= 24 else "07:00"
    begin = 0.0 if duration >= 24 else 7.0
    spike_h = rng.uniform(13.5, 16.5)
    factor = round(rng.uniform(1.2, 1.5), 2)
    shape: list[dict[str, Any]] = [{"kind": "daily", "timezone": tz, "points": _business_points(rng)}]
    if begin <= spike_h < begin + duration:
        shape.append({"kind": "spike", "at": f"{round((spike_h - begin) * 60)}m", "duration": "12m", "factor": factor})
    return _poisson(family, seed, scale, gpu, start=local_start(MONDAY, start_clock, tz), hours=duration,
                    shape=shape, peak_share=factor, tokens=_tokens(rng), base_ms=500,
                    what=f"weekday in {tz}, ×{factor:g} for 12 min at {spike_h:.1f} h")  # fmt: skip


def business_week(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """Thursday to Sunday (four days): weekdays peak 09:00-17:00 local, weekends at 20-40% of a weekday.
    Short runs start on Friday at 15:00 local (the week's fall into the weekend)."""
    family = "business-week"
    rng = rng_for(family, seed)
    tz = rng.choice(TIMEZONES)
    duration = _duration(hours, 96.0, family)
    start = local_start("2026-03-19", "00:00", tz) if duration >= 96 else local_start("2026-03-20", "15:00", tz)
    weekend = round(rng.uniform(0.2, 0.4), 2)
    low = round(rng.uniform(0.05, 0.15), 2)
    shape = [{"kind": "diurnal", "peak": "09:00-17:00", "timezone": tz, "low": low, "ramp": "2h",
              "weekend": weekend}]  # fmt: skip
    return _poisson(family, seed, scale, gpu, start=start, hours=duration, shape=shape, peak_share=1.0,
                    tokens=_tokens(rng), base_ms=500,
                    what=f"Thu-Sun in {tz}, night {low:g}, weekend ×{weekend:g}")  # fmt: skip


def _clock(hours: float) -> str:
    minutes = round(hours * 60) % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def flash_crowd(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """25% of the peak, then an unannounced surge to 4× that within 2-10 minutes, held 45-120 minutes, then
    a 20-minute fall. The surge comes at 30-50% of the run (6 h by default; it repeats each day)."""
    family = "flash-crowd"
    rng = rng_for(family, seed)
    duration = _duration(hours, 6.0, family)
    at = rng.uniform(0.3, 0.5) * min(duration, 24.0)
    rise = rng.randint(2, 10) / 60
    hold = rng.randint(45, 120) / 60
    # A daily profile in UTC from a midnight start: its points are hours into the run.
    points = [["00:00", 0.25], [_clock(at), 0.25], [_clock(at + rise), 1.0], [_clock(at + rise + hold), 1.0],
              [_clock(at + rise + hold + 1 / 3), 0.25]]  # fmt: skip
    if at + rise + hold + 1 / 3 < 23.98:
        points.append(["23:59", 0.25])
    shape = [{"kind": "daily", "timezone": "UTC", "points": points}]
    return _poisson(family, seed, scale, gpu, start=f"{MONDAY}T00:00:00+00:00", hours=duration, shape=shape,
                    peak_share=1.0, tokens=_tokens(rng), base_ms=500,
                    what=f"25% then ×4 within {rise * 60:.0f} min at {at:.2f} h for {hold * 60:.0f} min")  # fmt: skip


def periodic_bursts(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """Agents fired by cron on a business day: ×6 the load for 2-3 minutes every 15 minutes (from a drawn
    minute), over the daily base. Short runs start at 08:00 local."""
    family = "periodic-bursts"
    rng = rng_for(family, seed)
    tz = rng.choice(TIMEZONES)
    duration = _duration(hours, 24.0, family)
    start_clock = "00:00" if duration >= 24 else "08:00"
    first = rng.randint(0, 14)
    length = rng.choice((120, 150, 180))
    shape = [{"kind": "daily", "timezone": tz, "points": _business_points(rng)},
             {"kind": "spike", "at": f"{first}m", "duration": f"{length}s", "factor": 6, "every": "15m"}]  # fmt: skip
    return _poisson(family, seed, scale, gpu, start=local_start(MONDAY, start_clock, tz), hours=duration,
                    shape=shape, peak_share=6.0, tokens=_tokens(rng), base_ms=500,
                    what=f"weekday in {tz}, ×6 for {length} s every 15 min from minute {first}")  # fmt: skip


def long_context(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """A business day of long prompts: median ~6 k tokens, a tail to 32 k (lognormal, cv 0.8), 1 s TTFT target
    (raised where the p95 prompt does not prefill within half of it), max_model_len 34,816. Short runs start
    at 07:00 local."""
    family = "long-context"
    rng = rng_for(family, seed)
    tz = rng.choice(TIMEZONES)
    duration = _duration(hours, 24.0, family)
    start_clock = "00:00" if duration >= 24 else "07:00"
    median = rng.randint(50, 70) * 100
    cv = 0.8
    mean_in = round(median * math.sqrt(1 + cv * cv))  # a lognormal's mean from its median
    tokens = ({"mean": mean_in, "cv": cv, "max": 32768}, {"mean": rng.randint(8, 16) * 25, "cv": 0.6, "max": 2048})
    shape = [{"kind": "daily", "timezone": tz, "points": _business_points(rng)}]
    return _poisson(family, seed, scale, gpu, start=local_start(MONDAY, start_clock, tz), hours=duration,
                    shape=shape, peak_share=1.0, tokens=tokens, base_ms=1000,
                    what=f"weekday in {tz}, prompts median {median} (mean {mean_in}, max 32768)")  # fmt: skip


# ---- trace families ---------------------------------------------------------------------------------------
@cache
def _trace_stats(file: str) -> tuple[float, float, float, float, int]:
    """(requests per second, mean tokens per request, p95 prompt, p99 prompt, longest prompt + output)."""
    trace = read_trace(TRACES / file)
    total = trace.n_in + trace.n_out
    return (len(trace.t) / trace.span_s, float(total.mean()), float(np.percentile(trace.n_in, 95)),
            float(np.percentile(trace.n_in, 99)), int(total.max()))  # fmt: skip


def _trace(
    family: str,
    seed: int,
    scale: str | float,
    gpu: str,
    hours: float | None,
    *,
    file: str,
    fmt: str,
    per_scale_h100: float,
    base_ms: int,
    quantile: int,
) -> ShapeFiles:
    """A trace at fleet scale: its hour tiled over a business day, replicated as independent user
    populations (``rate_scale`` copies, each at its own offset)."""
    hw = hardware(family, gpu)
    aimed = aimed_instances(family, scale)
    top = tier_max(family, scale, aimed)
    rate, _, p95, p99, longest = _trace_stats(file)
    # measured on an H100 with the 8B; other hardware in proportion to its compute
    per_scale = per_scale_h100 * GPUS["h100-8b"].tokens_per_instance / hw.tokens_per_instance
    rate_scale = round(aimed / per_scale, 2)
    peak_rate = rate_scale * rate
    check_rate(family, scale, peak_rate)
    if rate_scale > 1000:
        raise ShapeError(f"{family}: scale {scale!r} needs the trace replicated {rate_scale:g}×; "
                         "a trace replays at most 1000×: choose a smaller scale")  # fmt: skip
    if rate_scale < 0.01:
        raise ShapeError(f"{family}: scale {scale!r} thins the trace to {rate_scale:g}×, under 1%: "
                         "choose a larger scale")  # fmt: skip
    rng = rng_for(family, seed)
    tz = rng.choice(TIMEZONES)
    duration = _duration(hours, 24.0, family)
    start_clock = "00:00" if duration >= 24 else "07:00"
    low = round(rng.uniform(0.1, 0.25), 2)
    ttft = _target(hw.tokens_per_instance, p99 if quantile == 99 else p95, base_ms)
    path = "${SCALECTL_TRACES:-" + str(TRACES) + "}/" + file
    load = {"kind": "trace", "path": path, "format": fmt, "repeat": 0, "rate_scale": rate_scale,
            "replication": "independent", "ttft_target": f"{ttft}ms",
            "shape": [{"kind": "diurnal", "peak": "09:00-17:00", "timezone": tz, "low": low,
                       "ramp": "2h"}]}  # fmt: skip
    limit = round_up(longest)
    workload = {"seed": seed, "start": local_start(MONDAY, start_clock, tz), "duration": f"{duration:g}h",
                "tiers": {"api": load}}  # fmt: skip
    tiers = {"tiers": {"api": serving_tier(hw, top, ttft, limit if limit > 4096 else None)}}
    summary = f"{file} ×{rate_scale:g} ({peak_rate:.1f} req/s at peak) in {tz}, night {low:g}, TTFT {ttft} ms"
    header = f"bench/shapes {family}, scale {scale}, {gpu}, seed {seed}: {summary}"
    return ShapeFiles(family, str(scale), gpu, seed, dump(tiers, header), dump(workload, header), peak_rate,
                      math.ceil(aimed), summary)  # fmt: skip


def azure_code(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """The Azure 2023 code trace at fleet scale over a business day (500 ms target, raised on slow GPUs)."""
    return _trace("azure-code", seed, scale, gpu, hours, file="azure-llm-2023-code.csv", fmt="azure",
                  per_scale_h100=TRACE_INSTANCES_PER_SCALE["code"], base_ms=500, quantile=99)  # fmt: skip


def azure_conv(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """The Azure 2023 conversation trace at fleet scale over a business day."""
    return _trace("azure-conv", seed, scale, gpu, hours, file="azure-llm-2023-conv.csv", fmt="azure",
                  per_scale_h100=TRACE_INSTANCES_PER_SCALE["conv"], base_ms=500, quantile=99)  # fmt: skip


def mooncake(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """The Mooncake conversation trace as several user populations (independent copies) over a business day:
    long prompts with shared prefixes; 1 s target raised until the p99 prompt (85 k tokens) prefills within
    half of it (3 s on an H100), max_model_len covering its longest request."""
    return _trace("mooncake", seed, scale, gpu, hours, file="mooncake-conversation.jsonl", fmt="mooncake",
                  per_scale_h100=MOONCAKE_INSTANCES_PER_SCALE, base_ms=1000, quantile=99)  # fmt: skip


# ---- batch -------------------------------------------------------------------------------------------------
def batch_bursts(seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    """A Celery batch tier with only ``max_wait`` set: a trickle plus bursts every 1-2 hours, each sized so
    that starting it within ``max_wait`` takes the scale's instances. Spot, on-demand fallback."""
    family = "batch-bursts"
    hw = hardware(family, gpu)
    aimed = aimed_instances(family, scale)
    top = tier_max(family, scale, aimed)
    rng = rng_for(family, seed)
    duration = _duration(hours, 12.0, family)
    task_s = rng.randint(3, 18) * 10
    slots = rng.choice((4, 6, 8))
    max_wait_s = rng.choice((10, 15, 20, 30)) * 60
    over_s = rng.randint(1, 5) * 60
    every_s = rng.choice((60, 90, 120)) * 60
    # tasks that `aimed` workers start within max_wait: rounds of task_s, each starting `slots` per worker
    wanted = aimed * slots * max(1.0, max_wait_s / task_s)
    trickle = round(0.1 * aimed * slots / task_s, 5)
    check_rate(family, scale, wanted / over_s + trickle, "tasks")
    tasks = max(1, round(wanted))
    peak_rate = tasks / over_s + trickle
    load = {"kind": "batch", "rate": trickle, "bursts": [{"at": "20m", "tasks": tasks, "over": f"{over_s}s",
            "every": f"{every_s}s"}], "task_time": {"mean": f"{task_s}s", "cv": 0.5}, "concurrency": slots,
            "wait_target": f"{max_wait_s}s"}  # fmt: skip
    workload = {"seed": seed, "start": f"{MONDAY}T18:00:00+00:00", "duration": f"{duration:g}h",
                "tiers": {"jobs": load}}  # fmt: skip
    tier: dict[str, Any] = {"capacity": "spot", "fallback": "on-demand", "gpu": hw.gpu}
    if hw.gpu_count > 1:
        tier["gpu_count"] = hw.gpu_count
    tier |= {"providers": ["simulated"], "min": 0, "max": top, "drain_timeout": f"{max(300, 4 * task_s)}s",
             "policy": {"kind": "scale-to-zero", "max_wait": f"{max_wait_s}s"}}  # fmt: skip
    summary = (f"{tasks} tasks over {over_s // 60} min every {every_s // 60} min, task {task_s} s, {slots} slots, "
               f"max_wait {max_wait_s // 60} min, trickle {trickle:g}/s")  # fmt: skip
    header = f"bench/shapes {family}, scale {scale}, {gpu}, seed {seed}: {summary}"
    return ShapeFiles(family, str(scale), gpu, seed, dump({"tiers": {"jobs": tier}}, header), dump(workload, header),
                      peak_rate, math.ceil(aimed), summary)  # fmt: skip


FAMILIES: dict[str, Generator] = {
    "business-day": business_day,
    "business-week": business_week,
    "flash-crowd": flash_crowd,
    "periodic-bursts": periodic_bursts,
    "long-context": long_context,
    "azure-code": azure_code,
    "azure-conv": azure_conv,
    "mooncake": mooncake,
    "batch-bursts": batch_bursts,
}


def generate(family: str, seed: int, scale: str | float, gpu: str, hours: float | None = None) -> ShapeFiles:
    if family not in FAMILIES:
        raise ShapeError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    return FAMILIES[family](seed, scale, gpu, hours)
