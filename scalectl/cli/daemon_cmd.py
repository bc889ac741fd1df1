"""`scalectl daemon`: run the controller in the foreground (systemd or a container runs it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from scalectl.cli.context import settings, user_errors
from scalectl.cli.files import chosen_file, file_option, old_spelling
from scalectl.cli.output import EXIT_ERROR, EXIT_USAGE, fail, option_duration
from scalectl.controller.logs import LogFormat, setup_logging


def register(app: typer.Typer) -> None:
    @app.command()
    def daemon(
        file: Path | None = file_option("Tiers file to apply and run.", required=False),
        speed: float = typer.Option(1.0, help="Run the simulated world N× faster (demos). 1 = real time."),
        ticks: int | None = typer.Option(None, help="Stop by itself after this many ticks."),
        run_for: str | None = typer.Option(None, help='Stop by itself after this much (simulated) time, e.g. "2h".'),
        port: int | None = typer.Option(None, help="HTTP port for /healthz, /readyz, /metrics (0: any free)."),
        log_level: str | None = typer.Option(
            None, help="debug, info, warning or error [env SCALECTL_LOG_LEVEL; default info]."
        ),
        log_format: LogFormat | None = typer.Option(
            None, help="text, or json: one object per line with ISO-8601 times [env SCALECTL_LOG_FORMAT]."
        ),
        observe: bool = typer.Option(
            False,
            "--observe",
            help="Observe only: read signals, decide and record, call no provider (beside another autoscaler; "
            "`scalectl report` prices what it would have run).",
        ),
        config_: Path | None = old_spelling("--config"),
    ) -> None:
        """Run the autoscaler. With no configuration: the bundled example tiers on the simulated cloud,
        with a synthetic load, printing every decision."""
        from scalectl.controller.daemon import Daemon, DaemonOptions

        if speed < 1:
            fail("--speed must be at least 1", EXIT_USAGE)
        duration = None if run_for is None else option_duration(run_for, "--run-for")
        config = chosen_file(file, config_, required=False)
        s = settings()
        if port is not None:
            s = s.model_copy(update={"http_port": port})
        if config is None and s.config_file is not None:
            config = s.config_file
        if observe and s.routing != "none":
            fail("--observe serves no traffic: routing must be none (unset SCALECTL_ROUTING)", EXIT_USAGE)
        from scalectl.controller.ha.file_lock import DaemonAlreadyRunning

        daemon = Daemon(
            s, DaemonOptions(config_file=config, speed=speed, max_ticks=ticks, run_for=duration, observe=observe)
        )
        try:
            setup_logging(
                log_level or s.log_level, log_format or LogFormat(s.log_format), daemon.world_now, speed=speed
            )
        except ValueError as exc:
            fail(f"--log-level: {exc}", EXIT_USAGE)
        with user_errors():
            try:
                code = asyncio.run(daemon.run())
            except DaemonAlreadyRunning as exc:
                fail(str(exc), EXIT_ERROR)
        raise typer.Exit(code)
