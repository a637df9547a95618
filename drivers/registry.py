"""The config chooses a driver by name: a second vendor's protocol is a new module here.

`driver` in the `[shuffler]` and `[shoe]` sections picks the protocol; `port` picks the
transport: `usb:VVVV:PPPP[:SERIAL]` (USB bulk), `socket://HOST:PORT` (a simulator in another
process), `memory://NAME` (a simulator in this process), anything else a serial device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tablectl.drivers.reference.link import DeviceReport, LinkSettings
from tablectl.drivers.shoe.base import Shoe
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.shuffler.base import Shuffler
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.drivers.transport import memory, socket
from tablectl.drivers.transport.base import Connector, TraceWriter
from tablectl.drivers.transport.serial import SerialConnector
from tablectl.drivers.transport.usb import SCHEME as USB_SCHEME
from tablectl.drivers.transport.usb import UsbAddress, UsbConnector

SHUFFLERS: dict[str, type[ReferenceShuffler]] = {"reference": ReferenceShuffler}
SHOES: dict[str, type[ReferenceShoe]] = {"reference": ReferenceShoe}
Emit = Callable[[DeviceReport], None]


def check_port(port: str) -> None:
    """Raise ValueError naming what is wrong with a port's address."""
    if port.startswith(USB_SCHEME):
        UsbAddress.parse(port)
    elif port.startswith(socket.SCHEME):
        socket.SocketConnector(port)


def connector_for(
    port: str, *, baudrate: int, usb_backend: Any = None, usb_read_timeout_ms: int = 10
) -> Connector:
    if port.startswith(USB_SCHEME):
        return UsbConnector(
            UsbAddress.parse(port), backend=usb_backend, read_timeout_ms=usb_read_timeout_ms
        )
    if port.startswith(socket.SCHEME):
        return socket.SocketConnector(port)
    if port.startswith(memory.SCHEME):
        return memory.MemoryConnector(memory.memory_port(port.removeprefix(memory.SCHEME)))
    return SerialConnector(port, baudrate)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSettings:
    """One device as the drivers are told it, already validated: the application's config
    (`[shuffler]`, `[shoe]`) is parsed in tablectl.config, which makes these."""

    driver: str  # a key of SHUFFLERS or SHOES
    port: str  # checked by check_port
    baudrate: int = 115200
    link: LinkSettings = field(default_factory=LinkSettings)
    usb_read_timeout_ms: int = 10  # the shoe's USB transport


def make_shuffler(
    settings: DeviceSettings,
    emit: Emit,
    *,
    cursor: tuple[int, int] | None = None,
    trace: TraceWriter | None = None,
    usb_backend: Any = None,
) -> Shuffler:
    connector = connector_for(settings.port, baudrate=settings.baudrate, usb_backend=usb_backend)
    return SHUFFLERS[settings.driver](connector, emit, settings.link, cursor, trace)


def make_shoe(
    settings: DeviceSettings,
    emit: Emit,
    *,
    cursor: tuple[int, int] | None = None,
    trace: TraceWriter | None = None,
    usb_backend: Any = None,
) -> Shoe:
    connector = connector_for(
        settings.port,
        baudrate=settings.baudrate,
        usb_backend=usb_backend,
        usb_read_timeout_ms=settings.usb_read_timeout_ms,
    )
    return SHOES[settings.driver](connector, emit, settings.link, cursor, trace)
