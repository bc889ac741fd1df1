"""The local provider's port for a new server is reserved, not merely found free: until the server binds
it, no other process's bind (which has no SO_REUSEADDR: every bind(0)) can take it and answer on the
instance's address."""

from __future__ import annotations

import errno
import socket

import pytest

from scalectl.providers.local import HOST, reserve_port


def test_a_reserved_port_refuses_plain_binds_and_takes_a_server_that_reuses_addresses() -> None:
    port = reserve_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as intruder:
        with pytest.raises(OSError) as refused:
            intruder.bind((HOST, port))
        assert refused.value.errno == errno.EADDRINUSE
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:  # what uvicorn and vLLM do
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((HOST, port))
        server.listen(1)


def test_reserved_ports_are_distinct() -> None:
    ports = [reserve_port() for _ in range(20)]
    assert len(set(ports)) == 20
