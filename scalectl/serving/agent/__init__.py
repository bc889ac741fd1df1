"""The on-instance spot agent: a POSIX shell script (curl + openssl) that watches the cloud's instance
metadata for an interruption notice and posts one signed notice to the daemon's webhook."""

from __future__ import annotations

from importlib.resources import files

SCRIPT_NAME = "scalectl-spot-agent.sh"


def spot_agent_script() -> str:
    return files(__package__).joinpath(SCRIPT_NAME).read_text(encoding="utf-8")
