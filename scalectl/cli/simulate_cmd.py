"""``scalectl simulate``: a workload through the real controller on virtual time, against the baselines."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from scalectl.cli.output import EXIT_USAGE, Format, OutputOption, emit, fail, report_console
from scalectl.cli.traces import MissingTrace, resolve_traces
from scalectl.simulator.controller_run import RunOptions, SimulationInputError, SimulationResult, simulate
from scalectl.simulator.plot import PlotFrame, plot_report  # matplotlib is imported only to draw
from scalectl.simulator.workloads.spec import Workload, WorkloadError, load_workload
from scalectl.simulator.workloads.traces import TraceError
from scalectl.tiers.config import ConfigError, FleetConfig, load_config
from scalectl.tiers.yaml_bounded import TooDeep, check_depth


def simulate_command(
    file: Path = typer.Option(..., "--file", "-f", help="Tiers file (tiers.yaml): the policies to simulate."),
    workload: Path = typer.Option(..., "--workload", "-w", help="Workload file: traffic per tier (and the cloud)."),
    output: Format = OutputOption,
    plot: Path | None = typer.Option(None, "--plot", help="Write a PNG of load, instances and TTFT over time."),
    seed: int | None = typer.Option(None, "--seed", help="Override the workload's seed."),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="Also run static/reactive/oracle."),
) -> None:
    """Replay a workload through the tiers' policies, the reconciler and a simulated cloud; report SLO and cost."""
    if plot is not None and importlib.util.find_spec("matplotlib") is None:  # say so before a long run
        fail("--plot needs matplotlib, an optional extra: pip install 'scalectl[plot]'", EXIT_USAGE)
    try:
        config, text = load_config(file)
        check_depth(workload.read_text(encoding="utf-8"))
        load = resolve_traces(load_workload(workload), str(workload))
    except (ConfigError, WorkloadError, MissingTrace) as exc:
        fail(str(exc), EXIT_USAGE)
    except TooDeep as exc:
        fail(f"{workload}: {exc}", EXIT_USAGE)
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{workload}: cannot read the file: {getattr(exc, 'strerror', None) or exc}", EXIT_USAGE)
    if seed is not None:
        load = load.model_copy(update={"seed": seed})
    stderr = Console(stderr=True)
    with Progress(
        TextColumn("[bold]simulating[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=not stderr.is_terminal,
    ) as bar:
        task = bar.add_task(workload.name, total=load.duration)
        try:
            result = simulate(
                config,
                text,
                load,
                options=RunOptions(baselines=baselines),
                progress=lambda done, _total: bar.update(task, completed=done),
                workload_source=str(workload),
                waiting=lambda left: _say_waiting(stderr, left),
            )
        except (SimulationInputError, TraceError) as exc:
            fail(str(exc), EXIT_USAGE)
    if plot is not None:
        plot_report(result.report, plot, plot_frame(config, load, workload.stem))
    data = result_dict(result)
    if output is Format.table:
        console = report_console()
        run_table, *baseline_tables = result.report.tables()
        console.print(run_table)
        if baselines:
            for table in baseline_tables:
                console.print(table)
        else:  # empty tables of dashes would read as baselines that ran and found nothing
            console.print("baselines: not run (--no-baselines)", highlight=False)
        lines = result.report.timeout_lines() + result.report.variant_lines() + result.report.rollout_lines()
        print_lines(console, lines, result.report.warnings)
        run = data["controller"]
        console.print(
            f"controller: {run['ticks']:,} ticks, {run['decisions']:,} decisions recorded, "
            f"{run['events'].get('launched', 0)} launched, {run['events'].get('retired', 0)} retired, "
            f"{run['events'].get('interrupted', 0) + run['events'].get('interruption-notice', 0)} interrupted; "
            f"billed ${run['billed']:,.2f}" + (f"; plot: {plot}" if plot else ""),
            highlight=False,
        )
    else:
        emit(data, output)


def print_lines(console: Console, lines: list[str], warnings: list[str]) -> None:
    """The report's sentences, whole: escaped (a "[2m, 5m]" in one is text, not rich markup that would swallow
    it) and never wrapped or cut by the console's width (a terminal or a pager wraps them)."""
    for line in lines:
        console.print(escape(line), highlight=False, soft_wrap=True)
    for line in warnings:
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _say_waiting(stderr: Console, left: list[str]) -> None:
    """On a terminal, a line above the progress bar each time the baselines still running change (the bar
    itself is full by then, and too narrow for their names)."""
    if stderr.is_terminal and left:
        stderr.print(f"the controller is done; waiting for the baselines: {', '.join(left)}", highlight=False)


def result_dict(result: SimulationResult) -> dict[str, Any]:
    data = result.report.to_dict()
    data["controller"] = {
        "ticks": result.ticks,
        "decisions": result.decisions,
        "events": dict(sorted(result.events.items())),
        "billed": result.billed,
        "billed_with_warmup": result.billed_with_warmup,
    }
    return data


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)


def plot_frame(config: FleetConfig, load: Workload, scenario: str) -> PlotFrame:
    """The plot's frame: the scenario, the workload's start clock and zone, the policies' TTFT targets."""
    zone = datetime.fromisoformat(load.start).tzinfo or UTC
    targets = {}
    for name, tier in config.tiers.items():
        target = getattr(tier.policy, "ttft_target", None)
        if isinstance(target, int | float):
            targets[name] = float(target)
    return PlotFrame(scenario=scenario, start_epoch=load.start_epoch, zone=zone, policy_ttft_targets=targets)
