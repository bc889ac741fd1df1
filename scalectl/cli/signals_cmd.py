"""``scalectl signals -f tiers.yaml [--window 15s]``: read every tier's signal sources now and print them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer

from scalectl.cli.files import tier_names
from scalectl.cli.output import EXIT_USAGE, Format, OutputOption, emit, fail, option_duration
from scalectl.clocks import SystemClock
from scalectl.sources.reader import SignalReader
from scalectl.sources.spec import NO_SOURCE, MetricsSource, SignalsSpec, has_source
from scalectl.tiers.config import ConfigError, FleetConfig, load_config

FIGURES = (
    "queue_depth",
    "in_flight",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "requests_waiting",
    "requests_running",
    "kv_cache_usage",
)


def _with_window(spec: SignalsSpec, window: float | None) -> SignalsSpec:
    if window is None:
        return spec
    metrics = spec.metrics or MetricsSource()
    return spec.model_copy(update={"metrics": metrics.model_copy(update={"window": window})})


async def read_all(config: FleetConfig, window: float | None, tiers: list[str] | None) -> list[dict[str, Any]]:
    """One read per tier, or two ``window`` apart so TTFT and rates have a window to span."""
    clock = SystemClock()
    reader = SignalReader(clock)
    selected = [t for t in config.tiers if not tiers or t in tiers]
    names = [t for t in selected if has_source(config.tiers[t].signals)]  # nothing to read, nothing to wait for
    specs = {name: _with_window(config.tiers[name].signals, window) for name in names}
    try:
        readings = await asyncio.gather(*(reader.read(n, specs[n], []) for n in names))
        if window is not None and names:
            await clock.sleep(window)
            readings = await asyncio.gather(*(reader.read(n, specs[n], []) for n in names))
    finally:
        await reader.aclose()
    read = dict(zip(names, readings, strict=True))
    rows = []
    for name in selected:
        if name not in read:
            rows.append({"tier": name, **dict.fromkeys(FIGURES), "errors": {"signals": NO_SOURCE}})
            continue
        values = read[name].signals.to_dict()
        rows.append({"tier": name, **{k: values[k] for k in FIGURES}, "errors": dict(read[name].errors)})
    return rows


def register(app: typer.Typer) -> None:
    @app.command("signals")
    def signals(
        file: Path = typer.Option(..., "--file", "-f", help="The tiers file (tiers.yaml)."),
        window: str = typer.Option(
            None, "--window", help='Read twice this far apart (e.g. "15s") so TTFT percentiles can be computed.'
        ),
        tier: list[str] = typer.Option(
            None, "--tier", help="Only these tiers (repeatable).", autocompletion=tier_names
        ),
        output: Format = OutputOption,
    ) -> None:
        """Read each tier's queue depth and vLLM metrics once and print them (null = unknown)."""
        try:
            config, _ = load_config(file)
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        seconds = None if window is None else option_duration(window, "--window")
        unknown = [t for t in (tier or []) if t not in config.tiers]
        if unknown:
            fail(f"{file}: no tier named {', '.join(unknown)}; tiers are: {', '.join(config.tiers)}", EXIT_USAGE)
        rows = asyncio.run(read_all(config, seconds, tier))
        if output is Format.table:
            for row in rows:
                row["errors"] = "; ".join(f"{k}: {v}" for k, v in row["errors"].items()) or None
        emit(rows, output, columns=["tier", *FIGURES, "errors"], title="signals")
