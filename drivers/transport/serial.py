"""Serial ports: opened and configured by pyserial, read and written on the event loop.

`exclusive=True` takes an advisory lock (flock) on the port, so a second tablectl (or any
program that honours the lock) cannot talk to the same device at once. Advisory only: a
program that does not ask for the lock still opens the port, so the real guard is the udev
rule's group (systemd/99-tablectl.rules), and one daemon per table is `tablectl run`'s own
lock (util/instance_lock.py). Which device answers is checked above this layer, by its
identity (IDENTIFY on every connect).

pyserial opens the port non-blocking and sets it up (baud rate, raw mode, the lock); the
loop then watches its file descriptor, and each read and write is one os.read or os.write
(`SerialConnection`). pyserial-asyncio-fast's transport, used before, writes through
pyserial's `write`, which blocks until the port has taken everything (a select() with no
timeout) -- the whole event loop stops while a device does not read -- and with
`write_timeout=0` spins on EAGAIN instead; it also did a select() before every read and went
through a stream reader and a task woken for every chunk, at each of the shuffler's polls.
What is owned here is that small piece over pyserial, tested against a pty that stops
reading (tests/test_device_transports.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

import serial
from tablectl.drivers.transport.base import TransportClosed, TransportUnavailable

READ_SIZE = 4096


class SerialConnector:
    def __init__(self, url: str, baudrate: int) -> None:
        self.url = url
        self.baudrate = baudrate

    @property
    def description(self) -> str:
        return self.url

    async def connect(self) -> SerialConnection:
        try:
            port = serial.serial_for_url(self.url, baudrate=self.baudrate, exclusive=True)
        except (OSError, serial.SerialException, ValueError) as exc:
            raise TransportUnavailable(f"{self.url}: {exc}") from exc
        try:
            fd = port.fileno()
        except OSError as exc:  # one of pyserial's URL handlers (loop://): nothing to watch
            port.close()
            raise TransportUnavailable(f"{self.url}: not a serial device ({exc})") from exc
        return SerialConnection(port, fd, self.url)


class SerialConnection:
    """An open serial port on the loop: what it receives is queued for read(), or pushed
    to the receiver push_to() names; what is written goes out at once (what the port does
    not take yet, when it is writable)."""

    def __init__(self, port: serial.Serial, fd: int, description: str) -> None:
        self._port = port
        self._fd = fd
        os.set_blocking(self._fd, False)  # (pyserial opens it so; the loop relies on it)
        self._description = description
        self._loop = asyncio.get_running_loop()
        self._received: list[bytes] = []
        self._receive: Callable[[bytes], None] | None = None  # push_to's
        self._reading: asyncio.Future[None] | None = None  # read() waiting for bytes
        self._ended: TransportClosed | None = None
        self._receiver_failed: Exception | None = None  # read() raises it (a bug)
        self._unsent = b""
        self._sent: asyncio.Future[None] | None = None  # drain() waiting for _unsent
        self._loop.add_reader(self._fd, self._readable)

    @property
    def description(self) -> str:
        return self._description

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # EIO: unplugged, or a pty's other end closed
            self._end(f"{self._description}: {exc}")
            return
        if not data:
            self._end(f"{self._description} closed")
            return
        if self._receive is None:
            self._received.append(data)
            self._wake_reader()
            return
        try:
            self._receive(data)
        except Exception as exc:  # noqa: BLE001 - a bug above: read() raises it, as it was
            self._receiver_failed = exc
            self._end(f"{self._description}: the receiver failed")

    def push_to(self, receive: Callable[[bytes], None]) -> None:
        """From now on hand what arrives to receive (what was queued first)."""
        self._receive = receive
        if self._received:
            data = b"".join(self._received)
            self._received.clear()
            receive(data)

    def _wake_reader(self) -> None:
        if self._reading is not None and not self._reading.done():
            self._reading.set_result(None)

    def _end(self, why: str) -> TransportClosed:
        """The port is gone: read(), write() and drain() say so from now on."""
        if self._ended is None:
            self._ended = TransportClosed(why)
        self._stop_watching()
        self._wake_reader()
        if self._sent is not None and not self._sent.done():
            self._sent.set_result(None)
        return self._ended

    def _stop_watching(self) -> None:
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)

    async def read(self) -> bytes:
        while not self._received:
            if self._receiver_failed is not None:
                raise self._receiver_failed
            if self._ended is not None:
                raise self._ended
            self._reading = self._loop.create_future()
            try:
                await self._reading
            finally:
                self._reading = None
        data = self._received[0] if len(self._received) == 1 else b"".join(self._received)
        self._received.clear()
        return data

    def write(self, data: bytes) -> None:
        if self._ended is not None:
            raise self._ended
        if self._unsent:
            self._unsent += data  # behind what is waiting for the port
            return
        self._send(data)

    def _send(self, data: bytes) -> None:
        try:
            sent = os.write(self._fd, data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            raise self._end(f"{self._description}: {exc}") from exc
        self._unsent = data[sent:]
        if self._unsent:
            self._loop.add_writer(self._fd, self._writable)
        elif self._sent is not None and not self._sent.done():
            self._sent.set_result(None)

    def _writable(self) -> None:
        self._loop.remove_writer(self._fd)
        with contextlib.suppress(TransportClosed):
            self._send(self._unsent)

    async def drain(self) -> None:
        """Until the port has taken everything written."""
        while self._unsent and self._ended is None:
            self._sent = self._loop.create_future()
            try:
                await self._sent
            finally:
                self._sent = None
        if self._ended is not None:
            raise self._ended

    async def close(self) -> None:
        if self._ended is None:
            self._ended = TransportClosed(f"{self._description} closed")
            self._stop_watching()
            self._wake_reader()
        self._port.close()  # the port and its lock released
