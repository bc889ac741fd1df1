"""`scalectl spot-agent`: print the on-instance spot agent (docs/webhooks.md#the-agent), for user data."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("spot-agent")
    def spot_agent() -> None:
        """Print the on-instance agent that posts signed interruption notices (AWS IMDSv2, GCP metadata)."""
        from scalectl.serving.agent import spot_agent_script

        typer.echo(spot_agent_script(), nl=False)
