"""A self-contained bash script for machines that take neither cloud-init nor a container image.

Same parts as the cloud-init form, written with heredocs. The SSH runner uploads it (and secrets.env,
mode 0600) into a staging directory and runs it as root.
"""

from __future__ import annotations

import shlex

from scalectl.serving.bootstrap import parts
from scalectl.sizing.server import ServerDescription


def _heredoc(path: str, content: str, mode: str) -> str:
    marker = "SCALECTL_EOF"
    if marker in content:  # never true for our parts; guard against a future edit breaking the script
        raise ValueError(f"{path}: content contains the heredoc marker")
    q = shlex.quote(path)
    parent = shlex.quote(path.rsplit("/", 1)[0])
    return f"install -d {parent}\ncat > {q} <<'{marker}'\n{content}{marker}\nchmod {mode} {q}\n"


def render_ssh_script(desc: ServerDescription) -> str:
    unit_path = f"/etc/systemd/system/{desc.unit_name}.service"
    files = "".join(
        (
            _heredoc(parts.CACHE_SCRIPT, parts.cache_script(desc), "0755"),
            _heredoc(parts.INSTALL_SCRIPT, parts.install_script(desc), "0755"),
            _heredoc(parts.ENV_FILE, parts.env_file(desc), "0644"),
            _heredoc(unit_path, parts.systemd_unit(desc), "0644"),
        )
    )
    return f"""\
#!/bin/bash
# Rendered by scalectl from one server description: installs and starts the vLLM unit.
set -euo pipefail
STAGING="${{SCALECTL_STAGING:-$(cd "$(dirname "$0")" && pwd)}}"
{files}if [ -f "$STAGING/secrets.env" ]; then
  install -m 0600 -o root -g root "$STAGING/secrets.env" {parts.SECRETS_FILE}
  rm -f "$STAGING/secrets.env"
fi
{parts.CACHE_SCRIPT}
{parts.INSTALL_SCRIPT}
systemctl daemon-reload
systemctl enable --now {desc.unit_name}.service
echo "scalectl: {desc.unit_name} started"
"""
