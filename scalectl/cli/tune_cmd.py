"""``scalectl tune``: search a tier's policy settings on the simulator for the lowest cost at an SLO target."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from scalectl.cli.files import tier_names
from scalectl.cli.output import EXIT_ERROR, EXIT_USAGE, Format, OutputOption, emit, fail, report_console
from scalectl.simulator.controller_run import SimulationInputError, models_for
from scalectl.simulator.tune import PACE, TuneInputError, TuneResult, prepare, tune
from scalectl.simulator.tune_report import best_yaml, frontier_table, plot, to_dict
from scalectl.simulator.workloads.spec import WorkloadError, load_workload
from scalectl.tiers.config import ConfigError, load_config


def tune_command(
    file: Path = typer.Option(..., "--file", "-f", help="Tiers file (tiers.yaml) holding the tier to tune."),
    workload: Path = typer.Option(..., "--workload", "-w", help="Workload file with traffic for the tier."),
    tier: str = typer.Option(
        ..., "--tier", "-t", help="The tier whose policy settings to search.", autocompletion=tier_names
    ),
    trials: int = typer.Option(30, "--trials", "-n", help="Simulations to run."),
    slo: float = typer.Option(0.995, "--slo", help="Share of requests with TTFT within the target to hold."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Trials run at once, each in its own process."),
    seed: int = typer.Option(0, "--seed", help="Seed of the search (the traffic keeps the workload's seed)."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write a PNG of every trial's cost against SLO."),
    stop_early: bool = typer.Option(
        True,
        "--stop-early/--run-every-trial-out",
        help="Stop a trial once it can no longer be the best (past the best cost, or more misses than the SLO "
        "allows); --run-every-trial-out runs each to the end, for a whole cost/SLO frontier.",
    ),
    pace: bool = typer.Option(
        True,
        "--pace/--exact-bounds",
        help=f"Also stop a trial spending over {PACE.margin:.0%} more than the best trial had at the same point "
        f"of the run, once {PACE.warmup:.0%} of it is past (a guess, not a bound: docs/simulator.md measures "
        "how often it is wrong); --exact-bounds stops only trials that cannot win.",
    ),
    storage: str | None = typer.Option(
        None,
        "--storage",
        help="Optuna RDB storage (postgresql://…, sqlite:///…): workers on several processes or machines run "
        "trials into one study, resumable; the best reported is the whole study's.",
    ),
    study: str | None = typer.Option(
        None, "--study", help="The study's name in --storage [default: TIER-WORKLOAD, the workload file's stem]."
    ),
    output: Format = OutputOption,
) -> None:
    """Find the cheapest policy settings whose simulated SLO attainment meets --slo; print them as YAML.

    Exits 1 when no trial reached the SLO (the closest is printed), 2 on bad input."""
    if trials < 1:
        fail(f"--trials: expected at least 1, got {trials}", EXIT_USAGE)
    if jobs < 1:
        fail(f"--jobs: expected at least 1, got {jobs}", EXIT_USAGE)
    if study is not None and storage is None:
        fail("--study names a study in --storage: give --storage too", EXIT_USAGE)
    study_name = study or f"{tier}-{workload.stem}"
    if not 0.0 < slo <= 1.0:
        fail(f"--slo: expected a share of requests in (0, 1], e.g. 0.995, got {slo:g}", EXIT_USAGE)
    try:
        config, text = load_config(file)
        load = load_workload(workload)
        prepare(config, load, tier, str(file), str(workload))
        models_for(config, load.model_copy(update={"tiers": {tier: load.tiers[tier]}}), str(workload))
    except (ConfigError, WorkloadError, TuneInputError, SimulationInputError) as exc:
        fail(" ".join(str(exc).split("\n")), EXIT_USAGE)
    stderr = Console(stderr=True)
    with Progress(
        TextColumn("[bold]tuning[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[best]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=not stderr.is_terminal,
    ) as bar:
        task = bar.add_task(tier, total=trials, best="")

        def advance(state: TuneResult) -> None:
            best = state.best
            note = f"best ${best.cost:,.2f} at {100 * (best.slo or 0):.2f}%" if best else "no trial meets the SLO yet"
            bar.update(task, completed=len(state.trials), best=note)

        try:
            result = tune(
                config, text, load, tier, trials=trials, slo_target=slo, jobs=jobs, seed=seed, progress=advance,
                source=str(file), stop_early=stop_early, pace=PACE if pace else None,
                storage=storage, study_name=study_name,
            )  # fmt: skip
        except TuneInputError as exc:
            fail(str(exc), EXIT_USAGE)
    if plot_path is not None:
        plot(result, plot_path)
    if output is Format.table:
        console = report_console()
        console.print(frontier_table(result))
        if storage is not None:
            console.print(f'study "{study_name}": {len(result.trials)} trials from every worker', highlight=False)
        stopped = sum(1 for t in result.trials if t.stopped is not None)
        if stopped:
            console.print(
                f"{stopped} of {len(result.trials)} trials stopped early: they could no longer be the best, or "
                "spent well ahead of it (not on the frontier; --run-every-trial-out runs them to the end)",
                highlight=False,
            )
        if result.best is None:
            stderr.print(
                f"[bold red]no trial reached the SLO target {100 * slo:.2f}%[/]; the closest found is below",
                highlight=False,
            )
        typer.echo(best_yaml(result), nl=False)
        if plot_path is not None:
            console.print(f"plot: {plot_path}", highlight=False)
    else:
        emit(to_dict(result), output)
    if result.best is None:
        raise typer.Exit(EXIT_ERROR)


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)
