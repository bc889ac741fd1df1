"""`scalectl daemon`: run the controller in the foreground (systemd or a container runs it)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import typer

from controller.cli.context import settings, user_errors
from controller.cli.output import EXIT_ERROR, EXIT_USAGE, fail
from policies.durations import parse_duration


def setup_logging(level: str) -> None:
    """One line per record (journald and `docker logs` friendly)."""
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)-7s %(message)s", datefmt="%H:%M:%S", force=True
    )
    for noisy in ("httpx", "httpcore", "uvicorn", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "skipped: already running" is by design


def register(app: typer.Typer) -> None:
    @app.command()
    def daemon(
        config: Path | None = typer.Option(None, "--config", "-f", help="Tiers file to apply and run."),
        speed: float = typer.Option(1.0, help="Run the simulated world N× faster (demos). 1 = real time."),
        ticks: int | None = typer.Option(None, help="Stop by itself after this many ticks."),
        run_for: str | None = typer.Option(None, help='Stop by itself after this much (simulated) time, e.g. "2h".'),
        port: int | None = typer.Option(None, help="HTTP port for /healthz, /readyz, /metrics (0: any free)."),
        log_level: str = typer.Option("info", help="debug, info, warning or error."),
    ) -> None:
        """Run the autoscaler. With no configuration: the bundled example tiers on the simulated cloud,
        with a synthetic load, printing every decision."""
        from controller.daemon import Daemon, DaemonOptions

        if speed < 1:
            fail("--speed must be at least 1", EXIT_USAGE)
        duration = None
        if run_for is not None:
            try:
                duration = parse_duration(run_for)
            except ValueError as exc:
                fail(f"--run-for: {exc}", EXIT_USAGE)
        setup_logging(log_level)
        s = settings()
        if port is not None:
            s = s.model_copy(update={"http_port": port})
        if config is None and s.config_file is not None:
            config = s.config_file
        from controller.ha.file_lock import DaemonAlreadyRunning

        with user_errors():
            try:
                code = asyncio.run(
                    Daemon(s, DaemonOptions(config_file=config, speed=speed, max_ticks=ticks, run_for=duration)).run()
                )
            except DaemonAlreadyRunning as exc:
                fail(str(exc), EXIT_ERROR)
        raise typer.Exit(code)
