"""Serial ports through pyserial-asyncio-fast, opened exclusively.

`exclusive=True` takes an advisory lock (flock) on the port, so a second tablectl (or any
program that honours the lock) cannot talk to the same device at once. Advisory only: a
program that does not ask for the lock still opens the port, so the real guard is the udev
rule's group (systemd/99-tablectl.rules), and one daemon per table is `tablectl run`'s own
lock (util/instance_lock.py). Which device answers is checked above this layer, by its
identity (IDENTIFY on every connect).
"""

from __future__ import annotations

import serial
import serial_asyncio_fast
from tablectl.drivers.transport.base import StreamConnection, TransportUnavailable


class SerialConnector:
    def __init__(self, url: str, baudrate: int) -> None:
        self.url = url
        self.baudrate = baudrate

    @property
    def description(self) -> str:
        return self.url

    async def connect(self) -> StreamConnection:
        try:
            reader, writer = await serial_asyncio_fast.open_serial_connection(
                url=self.url, baudrate=self.baudrate, exclusive=True
            )
        except (OSError, serial.SerialException, ValueError) as exc:
            raise TransportUnavailable(f"{self.url}: {exc}") from exc
        return StreamConnection(reader, writer, self.url)
