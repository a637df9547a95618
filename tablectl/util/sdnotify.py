"""systemd's notify protocol (sd_notify(3)): one datagram to $NOTIFY_SOCKET.

A dozen lines, so no dependency (python-systemd needs libsystemd headers to build).
"""

from __future__ import annotations

import os
import socket


def notify(message: str) -> bool:
    """Send READY=1, WATCHDOG=1, STATUS=...; False when not run by systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.connect(address)
        sock.sendall(message.encode())
    return True


def watchdog_interval_s() -> float | None:
    """Half of WatchdogSec= when systemd asks this process for keep-alives."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and int(pid) != os.getpid()):
        return None
    return int(usec) / 2_000_000
