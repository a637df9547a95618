"""An in-memory port: a simulated device plugged into the host, with a fault manipulator.

Modelled on pymodbus's NullModem (`set_manipulator`): each direction's bytes pass through an
optional manipulator `bytes -> list[bytes]` that may split them into parts, drop them (an
empty list), corrupt or add to them; `delay_s` holds every delivery back on the loop's clock.
A device can be unplugged (the open connection ends, new ones are refused) and another one
plugged in. Link, shuffler and shoe tests run on it in-process, on virtual time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from tablectl.drivers.transport.base import TransportClosed, TransportUnavailable

Manipulator = Callable[[bytes], list[bytes]]


class DeviceSide(Protocol):
    """A simulated device: bytes from the host in, its replies through `attach`'s callable."""

    def receive(self, data: bytes) -> None: ...

    def attach(self, send: Callable[[bytes], None] | None) -> None: ...


class MemoryPort:
    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self.device: DeviceSide | None = None
        self.to_device: Manipulator | None = None
        self.to_host: Manipulator | None = None
        self.delay_s = 0.0
        self.connections = 0
        self._conn: MemoryConnection | None = None

    def set_manipulator(
        self, *, to_device: Manipulator | None = None, to_host: Manipulator | None = None
    ) -> None:
        self.to_device, self.to_host = to_device, to_host

    def plug(self, device: DeviceSide) -> None:
        """Plug a device in (after unplugging whatever was there)."""
        self.unplug()
        self.device = device

    def unplug(self) -> None:
        """Pull the cable: the open connection ends and nothing answers until a plug()."""
        if self._conn is not None:
            self._conn.lost()
        if self.device is not None:
            self.device.attach(None)
        self.device = None
        self._conn = None

    def _open(self) -> MemoryConnection:
        if self.device is None:
            raise TransportUnavailable(f"{self.name}: nothing plugged in")
        if self._conn is not None:
            raise TransportUnavailable(f"{self.name}: busy (opened exclusively)")
        self.connections += 1
        conn = MemoryConnection(self)
        self._conn = conn
        self.device.attach(conn.from_device)
        return conn

    def _closed(self, conn: MemoryConnection) -> None:
        if self._conn is conn:
            self._conn = None
            if self.device is not None:
                self.device.attach(None)

    def _deliver(
        self, manipulator: Manipulator | None, data: bytes, to: Callable[[bytes], None]
    ) -> None:
        parts = manipulator(data) if manipulator else [data]
        for part in parts:
            if not part:
                continue
            if self.delay_s:
                asyncio.get_running_loop().call_later(self.delay_s, to, part)
            else:
                to(part)


class MemoryConnector:
    def __init__(self, port: MemoryPort) -> None:
        self.port = port

    @property
    def description(self) -> str:
        return f"memory:{self.port.name}"

    async def connect(self) -> MemoryConnection:
        return self.port._open()


class MemoryConnection:
    def __init__(self, port: MemoryPort) -> None:
        self._port = port
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._closed = False

    @property
    def description(self) -> str:
        return f"memory:{self._port.name}"

    def from_device(self, data: bytes) -> None:
        """The device sends: through the to-host manipulator into our inbox."""
        if self._closed:
            return
        self._port._deliver(self._port.to_host, data, self._inbox.put_nowait)

    def lost(self) -> None:
        self._closed = True
        self._inbox.put_nowait(None)

    async def read(self) -> bytes:
        data = await self._inbox.get()
        if data is None:
            raise TransportClosed(f"{self.description}: unplugged")
        return data

    def write(self, data: bytes) -> None:
        if self._closed:
            raise TransportClosed(f"{self.description}: unplugged")
        device = self._port.device
        if device is not None:
            self._port._deliver(self._port.to_device, data, self._to_device)

    def _to_device(self, data: bytes) -> None:
        device = self._port.device
        if not self._closed and device is not None:
            device.receive(data)

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._inbox.put_nowait(None)
        self._port._closed(self)


SCHEME = "memory://"
_PORTS: dict[str, MemoryPort] = {}


def memory_port(name: str) -> MemoryPort:
    """The in-process port a config names as `memory://NAME` (simulators plug into it)."""
    return _PORTS.setdefault(name, MemoryPort(name))
