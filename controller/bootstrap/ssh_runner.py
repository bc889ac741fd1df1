"""Run the rendered SSH script on a machine: upload it (and secrets.env, mode 0600) over SFTP, then run it.

Secrets travel only inside the SFTP channel; they are never part of a command line, log line or result.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from providers.secrets import Secret

TAIL_CHARS = 4000


@dataclass(frozen=True, slots=True)
class SshTarget:
    host: str
    port: int = 22
    username: str = "root"
    client_keys: Sequence[Any] | None = None  # key paths or asyncssh keys; None: the agent / default keys
    known_hosts: str | None = None  # path; None disables host-key checks (fresh cloud machines)
    staging_dir: str = "/var/tmp/scalectl-bootstrap"
    sudo: bool = False  # prefix with `sudo -n` when the login user is not root


@dataclass(frozen=True, slots=True)
class SshRunResult:
    exit_status: int
    stdout_tail: str
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class SshBootstrapError(Exception):
    pass


def _env_file(secrets: Mapping[str, Secret]) -> str:
    return "".join(f"{name}={shlex.quote(value.reveal())}\n" for name, value in sorted(secrets.items()))


async def run_bootstrap_over_ssh(
    target: SshTarget,
    script: str,
    *,
    secrets: Mapping[str, Secret] | None = None,
    connect_timeout: float = 30.0,
    run_timeout: float = 1800.0,
) -> SshRunResult:
    """Upload ``script`` to ``target.staging_dir`` and run it with bash; returns the exit status and output tails."""
    try:
        async with asyncssh.connect(
            target.host,
            port=target.port,
            username=target.username,
            client_keys=target.client_keys,
            known_hosts=target.known_hosts,
            connect_timeout=connect_timeout,
        ) as conn:
            async with conn.start_sftp_client() as sftp:
                await sftp.makedirs(target.staging_dir, exist_ok=True)
                await sftp.chmod(target.staging_dir, 0o700)
                script_path = posixpath.join(target.staging_dir, "bootstrap.sh")
                if secrets:
                    secrets_path = posixpath.join(target.staging_dir, "secrets.env")
                    async with sftp.open(secrets_path, "w", attrs=asyncssh.SFTPAttrs(permissions=0o600)) as fh:
                        await fh.write(_env_file(secrets))
                    await sftp.chmod(secrets_path, 0o600)
                async with sftp.open(script_path, "w") as fh:
                    await fh.write(script)
                await sftp.chmod(script_path, 0o700)
            command = f"SCALECTL_STAGING={shlex.quote(target.staging_dir)} bash {shlex.quote(script_path)}"
            if target.sudo:
                command = f"sudo -n env {command}"
            result = await conn.run(command, check=False, timeout=run_timeout)
    except (OSError, asyncssh.Error) as exc:
        raise SshBootstrapError(f"ssh {target.username}@{target.host}:{target.port}: {exc}") from None
    stdout = result.stdout if isinstance(result.stdout, str) else ""
    stderr = result.stderr if isinstance(result.stderr, str) else ""
    return SshRunResult(
        exit_status=result.exit_status if result.exit_status is not None else -1,
        stdout_tail=stdout[-TAIL_CHARS:],
        stderr_tail=stderr[-TAIL_CHARS:],
    )
