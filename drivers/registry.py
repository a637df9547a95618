"""The reference drivers' transports: `port` picks one.

`usb:VVVV:PPPP[:SERIAL]` (USB bulk), `socket://HOST:PORT` (a simulator in another process),
`memory://NAME` (a simulator in this process), anything else a serial device. Drivers
themselves are found by name through entry points (tablectl.drivers.api.load_driver): the
reference ones (drivers/reference_driver.py) like any vendor's.
"""

from __future__ import annotations

from typing import Any

from tablectl.drivers.transport import memory, socket
from tablectl.drivers.transport.base import Connector
from tablectl.drivers.transport.serial import SerialConnector
from tablectl.drivers.transport.usb import SCHEME as USB_SCHEME
from tablectl.drivers.transport.usb import UsbAddress, UsbConnector


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
