"""`scalectl report --since 24h [--current TIER=N ...]`: what the tiers would have run and cost (their recorded
decisions × the tier's catalogue price) beside what the current fleet ran (the count given per tier, at the
same price). For running an observing daemon (`scalectl daemon --observe`) beside an existing autoscaler."""

from __future__ import annotations

import typer

from scalectl.cli.context import open_store, settings, user_errors
from scalectl.cli.output import EXIT_USAGE, Format, OutputOption, emit, fail, option_duration

DECISIONS_READ = 1_000_000  # a day at one decision a minute is 1,440 per tier


def _counts(pairs: list[str], tiers: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not value.strip().isdigit():
            fail(f'--current: expected TIER=N (instances the current fleet runs), e.g. web=4, got "{pair}"', EXIT_USAGE)
        if name not in tiers:
            fail(f'--current: unknown tier "{name}"; tiers: {", ".join(sorted(tiers)) or "(none applied)"}', EXIT_USAGE)
        counts[name] = int(value)
    return counts


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        since: str = typer.Option("24h", help='The window, back from now, e.g. "24h".'),
        current: list[str] = typer.Option(
            [], "--current", help="TIER=N: instances the current fleet ran (repeat per tier); priced like ours."
        ),
        output: Format = OutputOption,
    ) -> None:
        """What the tiers would have run and cost beside what the current fleet ran and cost."""
        from scalectl.clocks import SystemClock
        from scalectl.controller.store.world_clock import world_now
        from scalectl.controller.views.shadow_report import REPORT_COLUMNS, shadow_report
        from scalectl.tiers.config import TierSpec

        window = option_duration(since, "--since")
        with user_errors():
            store = open_store(settings())
            specs = store.config.tier_specs()
            counts = _counts(current, set(specs))
            now = world_now(store, SystemClock().now())
            prices = {n: TierSpec.model_validate(s).catalogue_price_per_hour() for n, s in specs.items()}
            steps = {
                n: [(d.t, d.desired) for d in store.records.decisions(n, limit=DECISIONS_READ, since=now - window)]
                for n in specs
            }
        rows = shadow_report(steps, prices, counts, now)
        if output is not Format.table:
            emit(rows, output)
            return
        emit(rows, output, columns=REPORT_COLUMNS, title=f"the last {since}: would run (decisions) vs current fleet")
        known = [r for r in rows if r["difference"] is not None]
        if known:
            total = sum(r["difference"] for r in known)
            typer.echo(f"difference over {len(known)} tier(s): ${total:,.2f} ({'saved' if total < 0 else 'more'})")
        if not counts:
            typer.echo("current fleet: not given (--current TIER=N for each tier the existing autoscaler runs)")
