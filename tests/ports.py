"""Loopback ports for servers that a test starts by port number (nginx, a daemon, a stand-in process).

Asking the kernel (bind to port 0, close, hand the number on) leaves a moment before the server binds it, and
with the tests in parallel (pytest-xdist) another worker's bind to port 0 can be given that same port then.
So each worker takes its ports from a block of its own below the kernel's ephemeral range, where neither
bind(0) nor an outgoing connection lands, and checks that each is free before handing it on.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

FIRST = 20000  # blocks of BLOCK ports from here, one per worker, below the usual ephemeral range (32768-60999)
BLOCK = 1000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_index() -> int:
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ... (unset when serial)
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def _block() -> range | None:
    blocks = max(0, (_ephemeral_low() - FIRST) // BLOCK)
    if blocks == 0:  # the ephemeral range starts below FIRST: no room for blocks of our own
        return None
    start = FIRST + (_worker_index() % blocks) * BLOCK
    return range(start, start + BLOCK)


_BLOCK = _block()
_NEXT = itertools.count()


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nobody listens on now, this worker's own (the kernel's choice where no block fits)."""
    if _BLOCK is not None:
        for _ in range(len(_BLOCK)):
            port = _BLOCK[next(_NEXT) % len(_BLOCK)]
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
