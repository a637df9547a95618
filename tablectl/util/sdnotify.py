"""systemd's notify protocol (sd_notify(3)): datagrams to $NOTIFY_SOCKET, never blocking.

A few dozen lines, so no dependency (python-systemd needs libsystemd headers to build). The
daemon notifies from its event loop, so a send must never wait: systemd reads the socket
when it can, and a datagram socket whose reader has stopped blocks a blocking sender for as
long as it stays full (the loop stopped after about a hundred STATUS= updates), and a socket
nobody listens on refuses (which once ended the daemon at SIGTERM). So:

- the socket is non-blocking; a datagram the socket cannot take now is kept, merged with
  what follows (the latest STATUS= wins, READY=1, STOPPING=1 and WATCHDOG=1 are kept), and
  sent from the loop as soon as the socket can take it again (`add_writer`);
- a refusal (nobody bound, permission, no such file) is logged once and the notification
  dropped: the daemon serves the table with or without systemd listening.

WATCHDOG=1 is still sent from the loop (`keep_alive`, a task of the daemon): a wedged loop
sends none, and systemd restarts the daemon; a full socket delays it, as systemd itself is slow.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket

import structlog

log = structlog.get_logger(__name__)


class Notifier:
    """One notify socket, written without blocking. None as address: not run by systemd."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self._sock: socket.socket | None = None
        self._pending: dict[str, str] = {}  # what is still to say, by variable
        self._writer_loop: asyncio.AbstractEventLoop | None = None
        self._trouble: str | None = None  # the last problem logged, so it is logged once
        self.sent = 0
        self.deferred = 0  # notifications the socket could not take at once
        self.dropped = 0  # notifications refused

    def notify(self, message: str) -> bool:
        """Say READY=1, WATCHDOG=1, STATUS=...; False when not run by systemd or refused.
        True also when the socket is full and the message waits for it (merged)."""
        if not self.address:
            return False
        for line in message.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                self._pending.pop(key, None)  # moved to the end: said in the order asked
                self._pending[key] = value
        return self._flush()

    @property
    def waiting(self) -> bool:
        """Something is waiting for the socket to take it."""
        return bool(self._pending)

    def close(self) -> None:
        self._stop_waiting()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _flush(self) -> bool:
        if not self._pending:
            self._stop_waiting()
            return True
        datagram = "\n".join(f"{k}={v}" for k, v in self._pending.items()).encode()
        try:
            self._socket().send(datagram)
        except BlockingIOError:
            self.deferred += 1
            self._wait_for_room()
            self._say_once(
                "full", "systemd is not reading its notify socket: the latest notification waits"
            )
            return True
        except OSError as exc:  # refused, no such socket, permission: not systemd's now
            self.dropped += 1
            self._pending.clear()
            self._stop_waiting()
            self.close()
            self._say_once("refused", "systemd's notify socket refused", error=str(exc))
            return False
        self.sent += 1
        self._pending.clear()
        self._stop_waiting()
        if self._trouble is not None:
            log.info("systemd's notify socket takes notifications again")
            self._trouble = None
        return True

    def _socket(self) -> socket.socket:
        if self._sock is None:
            assert self.address is not None
            address = self.address
            if address.startswith("@"):
                address = "\0" + address[1:]  # abstract namespace
            sock = socket.socket(
                socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
            )
            try:
                sock.connect(address)
            except OSError:
                sock.close()
                raise
            self._sock = sock
        return self._sock

    def _wait_for_room(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next notify tries again
        if self._writer_loop is loop or self._sock is None:
            return
        self._stop_waiting()
        loop.add_writer(self._sock.fileno(), self._flush)
        self._writer_loop = loop

    def _stop_waiting(self) -> None:
        loop, self._writer_loop = self._writer_loop, None
        if loop is not None and self._sock is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError, ValueError):
                loop.remove_writer(self._sock.fileno())

    def _say_once(self, trouble: str, event: str, **fields: str) -> None:
        if self._trouble != trouble:
            self._trouble = trouble
            log.warning(event, **fields)


_notifier: Notifier | None = None


def notifier() -> Notifier:
    """The process's notifier, for $NOTIFY_SOCKET as it is now."""
    global _notifier
    address = os.environ.get("NOTIFY_SOCKET") or None
    if _notifier is None or _notifier.address != address:
        if _notifier is not None:
            _notifier.close()
        _notifier = Notifier(address)
    return _notifier


def notify(message: str) -> bool:
    """Send READY=1, WATCHDOG=1, STATUS=... without blocking; False when not run by systemd
    (or its socket refused). Call it from the event loop's thread."""
    return notifier().notify(message)


def watchdog_interval_s() -> float | None:
    """Half of WatchdogSec= when systemd asks this process for keep-alives."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and int(pid) != os.getpid()):
        return None
    return int(usec) / 2_000_000


async def keep_alive() -> None:
    """WATCHDOG=1 every half WatchdogSec=, while systemd asks for it (returns at once if not)."""
    interval = watchdog_interval_s()
    if interval is None:
        return
    while True:
        # Sent from the event loop, so a wedged loop stops the keep-alives and systemd
        # restarts the daemon (which comes back in the safe, locked-out state).
        notify("WATCHDOG=1")
        await asyncio.sleep(interval)
