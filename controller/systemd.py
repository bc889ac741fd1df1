"""systemd's notify protocol (sd_notify): READY, WATCHDOG, STOPPING, STATUS. A no-op outside systemd."""

from __future__ import annotations

import os
import socket


class SystemdNotifier:
    def __init__(self, socket_path: str | None = None):
        path = socket_path if socket_path is not None else os.environ.get("NOTIFY_SOCKET")
        self.address = ("\0" + path[1:]) if path and path.startswith("@") else path

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def notify(self, message: str) -> bool:
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(self.address)
                sock.sendall(message.encode("utf-8"))
            return True
        except OSError:
            return False

    def ready(self, status: str = "") -> None:
        self.notify("READY=1" + (f"\nSTATUS={status}" if status else ""))

    def watchdog(self) -> None:
        self.notify("WATCHDOG=1")

    def stopping(self) -> None:
        self.notify("STOPPING=1")

    def status(self, text: str) -> None:
        self.notify(f"STATUS={text}")


def watchdog_interval() -> float | None:
    """Half of WATCHDOG_USEC (systemd's advice), in seconds, when the watchdog is on for this process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000
