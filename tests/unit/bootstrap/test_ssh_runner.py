"""The SSH runner against a real asyncssh server on 127.0.0.1 (SFTP + exec), started and stopped here."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncssh
import pytest

from controller.bootstrap.ssh_runner import SshBootstrapError, SshTarget, run_bootstrap_over_ssh
from providers.secrets import Secret


async def _run_locally(process: asyncssh.SSHServerProcess) -> None:
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", process.command or "true", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    process.stdout.write(out.decode())
    process.stderr.write(err.decode())
    process.exit(proc.returncode or 0)


@pytest.fixture
async def ssh_server():
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
    server = await asyncssh.create_server(
        asyncssh.SSHServer,
        "127.0.0.1",
        0,
        server_host_keys=[host_key],
        authorized_client_keys=authorized,
        sftp_factory=True,
        process_factory=_run_locally,
    )
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, client_key
    finally:
        server.close()
        await server.wait_closed()


async def test_uploads_secrets_privately_and_runs_the_script(ssh_server, tmp_path: Path) -> None:
    port, key = ssh_server
    staging = tmp_path / "staging"
    out = tmp_path / "out.txt"
    script = f"""#!/bin/bash
set -euo pipefail
. "$SCALECTL_STAGING/secrets.env"
stat -c %a "$SCALECTL_STAGING/secrets.env" > {out}
echo "token-length=${{#HF_TOKEN}}" >> {out}
echo started
"""
    target = SshTarget("127.0.0.1", port, username=os.environ.get("USER", "root"), client_keys=[key],
                       staging_dir=str(staging))  # fmt: skip
    result = await run_bootstrap_over_ssh(target, script, secrets={"HF_TOKEN": Secret("hf_0123456789")})
    assert result.ok, result.stderr_tail
    assert result.stdout_tail.strip() == "started"
    assert out.read_text().splitlines() == ["600", "token-length=13"]
    assert "hf_0123456789" not in repr(result)


async def test_failing_script_reports_its_exit_status(ssh_server, tmp_path: Path) -> None:
    port, key = ssh_server
    target = SshTarget("127.0.0.1", port, client_keys=[key], staging_dir=str(tmp_path / "s"))
    result = await run_bootstrap_over_ssh(target, "echo boom >&2; exit 3\n")
    assert (result.exit_status, result.stderr_tail.strip()) == (3, "boom")


async def test_wrong_key_is_a_clear_error(ssh_server, tmp_path: Path) -> None:
    port, _ = ssh_server
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    target = SshTarget("127.0.0.1", port, client_keys=[stranger], staging_dir=str(tmp_path / "s"))
    with pytest.raises(SshBootstrapError, match=f"127.0.0.1:{port}"):
        await run_bootstrap_over_ssh(target, "true\n", connect_timeout=5)
