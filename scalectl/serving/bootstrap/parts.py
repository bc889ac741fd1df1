"""The pieces every bootstrap form shares: the cache script, the env file and the systemd unit.

Rendered once from a ServerDescription; cloud-init ships them as files, the SSH script as heredocs.
"""

from __future__ import annotations

import shlex

from scalectl.sizing.server import DEFAULT_CACHE_DIR, NVME_MOUNT, ServerDescription

CONF_DIR = "/etc/scalectl"
ENV_FILE = f"{CONF_DIR}/vllm.env"
SECRETS_FILE = f"{CONF_DIR}/secrets.env"  # placed out of band, mode 0600; optional for the unit
CACHE_SCRIPT = "/usr/local/sbin/scalectl-model-cache"
INSTALL_SCRIPT = "/usr/local/sbin/scalectl-install-vllm"
VENV = "/opt/scalectl/venv"


def cache_script(desc: ServerDescription) -> str:
    """Pick the model cache: an explicit dir, else a spare (unpartitioned, unmounted) NVMe, else /var/cache."""
    if desc.cache_dir:
        body = f'CACHE={shlex.quote(desc.cache_dir)}\nmkdir -p "$CACHE"\n'
    else:
        body = f"""\
CACHE={DEFAULT_CACHE_DIR}
MNT={NVME_MOUNT}
LABELLED="$(blkid -L scalectl-cache 2>/dev/null || true)"
if mountpoint -q "$MNT"; then
  CACHE="$MNT/models"
elif [ -n "$LABELLED" ]; then
  # Our cache disk from an earlier boot: mount it again.
  mkdir -p "$MNT" && mount -o noatime "$LABELLED" "$MNT" && CACHE="$MNT/models"
else
  # A whole NVMe disk with no partitions, no filesystem and no mount is spare local storage: use it.
  for dev in $(lsblk -dpno NAME,TYPE 2>/dev/null | awk '$2 == "disk" && $1 ~ /nvme/ {{print $1}}'); do
    if [ -z "$(lsblk -no MOUNTPOINT "$dev" | tr -d '[:space:]')" ] && [ "$(lsblk -no NAME "$dev" | wc -l)" -eq 1 ] \\
       && [ -z "$(blkid -o value -s TYPE "$dev" 2>/dev/null)" ]; then
      mkfs.ext4 -q -F -L scalectl-cache "$dev" && mkdir -p "$MNT" && mount -o noatime "$dev" "$MNT" \\
        && CACHE="$MNT/models" && break
    fi
  done
fi
mkdir -p "$CACHE"
"""
    return f"""\
#!/bin/bash
# Chooses the model cache directory and records it as HF_HOME for the vLLM unit.
set -euo pipefail
{body}mkdir -p {CONF_DIR}
echo "HF_HOME=$CACHE" > {CONF_DIR}/cache.env
echo "model cache: $CACHE"
"""


def install_script(desc: ServerDescription) -> str:
    """Install vLLM into a venv when the image does not already have it."""
    spec = f"vllm=={desc.pip_version}" if desc.pip_version else "vllm"
    return f"""\
#!/bin/bash
# Installs vLLM unless the machine image already provides it.
set -euo pipefail
if command -v vllm >/dev/null 2>&1 || [ -x {VENV}/bin/vllm ]; then exit 0; fi
python3 -m venv {VENV}
{VENV}/bin/pip install --quiet {shlex.quote(spec)}
"""


def env_file(desc: ServerDescription) -> str:
    lines = ["# Plain settings for the vLLM unit. Secrets live in secrets.env (mode 0600), never here."]
    lines += [f"{k}={shlex.quote(v)}" for k, v in sorted(desc.env.items())]
    return "\n".join(lines) + "\n"


def exec_argv(desc: ServerDescription) -> list[str]:
    return ["vllm", "serve", desc.model, *desc.args]


def systemd_unit(desc: ServerDescription) -> str:
    secrets = ", ".join(desc.secret_env) or "none"
    command = shlex.join(exec_argv(desc)[1:])
    return f"""\
[Unit]
Description=vLLM server for {desc.model} (managed by scalectl)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
EnvironmentFile={ENV_FILE}
EnvironmentFile=-{CONF_DIR}/cache.env
# Secrets ({secrets}) come from this file, placed out of band with mode 0600.
EnvironmentFile=-{SECRETS_FILE}
Environment=PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ExecStart=/usr/bin/env vllm {command}
# SIGTERM lets vLLM drain in-flight requests (--shutdown-timeout); systemd waits a little longer.
KillSignal=SIGTERM
TimeoutStopSec={desc.stop_timeout}
Restart=on-failure
RestartSec=5
LimitNOFILE=65535

[Install]
WantedBy=multi-user.target
"""


INTERRUPTION_NOTE = """\
Spot interruptions: the scalectl daemon learns of them from provider webhooks or by polling instance
status. On clouds with a metadata notice (AWS /latest/meta-data/spot/instance-action, GCP
instance/preempted) an on-instance watcher may stop the unit early (systemctl stop {unit}) so vLLM
drains within --shutdown-timeout; nginx stops routing to the instance once it is no longer ready.
"""
