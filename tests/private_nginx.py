"""A private nginx master for tests: its own prefix, config, pid file and ports; never the system one."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


@dataclass
class PrivateNginx:
    prefix: Path
    conf_d: Path  # where tier upstream files go (included by the main config)
    main: Path
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def private_nginx(prefix: Path, *, worker_connections: int, start_polls: int) -> Iterator[PrivateNginx]:
    """Start nginx under ``prefix`` (waiting at most ``start_polls`` × 50 ms for its pid); stop it after."""
    if not os.path.exists(NGINX):
        pytest.fail("nginx is not installed: apt-get update && apt-get install -y nginx-light")
    conf_d = prefix / "conf.d"
    for d in ("conf.d", "body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"):
        (prefix / d).mkdir(parents=True, exist_ok=True)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    main = prefix / "nginx.conf"
    main.write_text(
        f"""{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log info;
events {{ worker_connections {worker_connections}; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {conf_d}/*.conf;
}}
"""
    )
    proc = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(main)], stderr=subprocess.PIPE)
    pid_file = prefix / "nginx.pid"
    for _ in range(start_polls):  # bounded wait for the master to write its pid
        if pid_file.exists() and pid_file.read_text().strip():
            break
        if proc.poll() is not None:
            pytest.fail(f"nginx exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.05)
    try:
        yield PrivateNginx(prefix, conf_d, main, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
