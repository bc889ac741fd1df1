"""Replay a recorded signal timeline through the tiers' policies: what would the autoscaler have done?

Input: JSON lines ``{"t": <epoch seconds | ISO-8601>, "tier": "research", "queue_depth": 3, ...}`` with
any ``Signals`` field (absent or null = unknown) and an optional ``"current"`` override. Output: one
``{"t", "tier", "desired", "reason"}`` per input line. Each decision is assumed to take effect at once
(the next ``current`` is this ``desired``; a tier starts at its ``min``). Policy state and demand
history are carried per tier, exactly as the daemon carries them.

The whole input is validated while it runs; the first problem raises ``BacktestInputError`` naming the
file and line, and nothing is returned.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scalectl.controller.reconciler.decide import PolicyRunner, bounds_for, tier_price_per_hour
from scalectl.policies.external import ExternalPolicyError
from scalectl.policies.types import Bounds, PolicyInput, PolicyState, Signals
from scalectl.sizing.gpus import GPUS
from scalectl.tiers.config import FleetConfig, TierSpec, load_config

SIGNAL_FIELDS = tuple(f.name for f in fields(Signals))
_RESERVED = ("t", "tier", "current")


class BacktestInputError(ValueError):
    """Bad backtest input; the message names the file and line (or tier) and what to fix."""


def tier_bounds(name: str, tier: TierSpec) -> Bounds:
    """The tier's hard limits; a budget is an error when the tier's GPU has no price to measure it in."""
    if tier.budget_per_hour is not None and tier_price_per_hour(tier) is None:
        raise ValueError(
            f'tier "{name}": gpu: unknown GPU {tier.gpu!r}, so budget_per_hour cannot be enforced; '
            f"use one of: {', '.join(GPUS)}"
        )
    return bounds_for(tier)


@dataclass(frozen=True, slots=True)
class TimelineRow:
    t: float
    tier: str
    signals: Signals
    current: int | None


@dataclass
class _TierRun:
    """What carries from one line to the next for a tier."""

    name: str
    spec: TierSpec
    bounds: Bounds
    state: PolicyState = field(default_factory=PolicyState)
    current: int | None = None
    last_t: float | None = None
    last_line: int = 0


def parse_timeline_line(text: str, config: FleetConfig) -> TimelineRow:
    """One JSONL line as a row; ValueError with the problem (the caller adds file and line)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise ValueError('expected a JSON object like {"t": 1767225600, "tier": "research", "queue_depth": 3}')
    tier = obj.get("tier")
    if not isinstance(tier, str):
        raise ValueError('"tier": required, the name of a tier in the tiers file')
    if tier not in config.tiers:
        raise ValueError(f'unknown tier "{tier}"; known tiers: {", ".join(sorted(config.tiers))}')
    if "t" not in obj:
        raise ValueError('"t": required, epoch seconds or an ISO-8601 time like "2026-03-09T12:00:00Z"')
    values: dict[str, float | None] = {}
    for key, value in obj.items():
        if key in _RESERVED:
            continue
        if key not in SIGNAL_FIELDS:
            raise ValueError(f'unknown field "{key}"; signal fields are: {", ".join(SIGNAL_FIELDS)}')
        values[key] = _number(key, value)
    return TimelineRow(_timestamp(obj["t"]), tier, Signals(**values), _current(obj.get("current")))


def _number(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f'"{key}": expected a number or null, got {json.dumps(value)}')
    if not math.isfinite(value) or value < 0:
        raise ValueError(f'"{key}": expected a finite number ≥ 0, got {value!r}')
    return float(value)


def _timestamp(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f'"t": expected epoch seconds or an ISO-8601 time, got {value!r}')
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:  # a time without an offset is read as UTC
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    raise ValueError(f'"t": expected epoch seconds or an ISO-8601 time like "2026-03-09T12:00:00Z", got {value!r}')


def _current(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        raise ValueError(f'"current": expected a whole number of instances ≥ 0, got {json.dumps(value)}')
    return int(value)


def _start_tier(name: str, tier: TierSpec, runner: PolicyRunner, config_source: str) -> _TierRun:
    """Check the tier can run (budget priced, external policy loadable) before its first line."""
    try:
        bounds = tier_bounds(name, tier)
        runner.external_for(name, tier)
    except ExternalPolicyError as exc:
        raise BacktestInputError(f'{config_source}: tier "{name}": {exc}') from None
    except ValueError as exc:
        raise BacktestInputError(f"{config_source}: {exc}") from None
    return _TierRun(name, tier, bounds)


def run_backtest(
    config: FleetConfig, lines: Iterable[str], source: str, *, config_source: str = "tiers file"
) -> list[dict[str, Any]]:
    """Decide for every line of a timeline; raises BacktestInputError (file, line, fix) on bad input."""
    runner = PolicyRunner()  # the same policy runner the daemon and the simulator use
    runs: dict[str, _TierRun] = {}
    out: list[dict[str, Any]] = []
    for lineno, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            row = parse_timeline_line(text, config)
        except ValueError as exc:
            raise BacktestInputError(f"{source}: line {lineno}: {exc}") from None
        run = runs.get(row.tier)
        if run is None:
            run = runs[row.tier] = _start_tier(row.tier, config.tiers[row.tier], runner, config_source)
        if run.last_t is not None and row.t < run.last_t:
            raise BacktestInputError(
                f'{source}: line {lineno}: time goes backwards for tier "{row.tier}": {row.t:g} is before '
                f"{run.last_t:g} (line {run.last_line}); sort the timeline by time"
            )
        current = row.current if row.current is not None else run.current
        if current is None:
            current = run.spec.min
        inp = PolicyInput(row.t, row.signals, current, run.state)
        decision = runner.decide(row.tier, run.spec, inp, run.bounds)
        run.state, run.current, run.last_t, run.last_line = decision.state, decision.desired, row.t, lineno
        out.append({"t": row.t, "tier": row.tier, "desired": decision.desired, "reason": decision.reason})
    return out


def run_backtest_file(config_path: str | Path, signals_path: str | Path) -> list[dict[str, Any]]:
    """Load a tiers file and a JSONL timeline and replay it (ConfigError / BacktestInputError on bad input)."""
    config, _ = load_config(config_path)
    path = Path(signals_path)
    try:
        with path.open(encoding="utf-8") as handle:
            return run_backtest(config, handle, str(path), config_source=str(config_path))
    except OSError as exc:
        raise BacktestInputError(f"{path}: cannot read the file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BacktestInputError(f"{path}: not UTF-8 text; expected JSON lines") from None


def rows_for_table(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``t`` as an ISO-8601 UTC time, for people reading a table."""
    return [{**row, "t": datetime.fromtimestamp(row["t"], UTC).isoformat().replace("+00:00", "Z")} for row in rows]
