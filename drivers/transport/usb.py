"""USB bulk transfers through pyusb: a reader and a writer thread per device, bridged to asyncio.

pyusb has no asyncio API and its transfers block, so each open device gets two threads (libusb
lets transfers on different endpoints run at once): the writer sleeps on the queue the loop
fills and writes each request the moment it is queued, and the reader reads the bulk IN
endpoint, handing what arrives to the loop (`call_soon_threadsafe`). The read timeout only
bounds how soon a closed connection's reader notices; it never delays a write (one thread
doing both made every request wait out the read in progress, 10 ms). ENODEV (errno 19) means
the device was unplugged: the connection ends and the reconnect loop looks for the device
again.

The device is found by vendor id and product id, the stable names udev also uses, and by
serial number when one is given: that device if it is there, else the one device of that
model on the bus, so a replacement (another serial number) is opened, identified by the link
and held by the core until a technician accepts it (`tablectl devices accept`), as on a
serial port. Two devices of the model, neither with the serial number: none is opened.

Tests use a backend of our own (`usb.backend.IBackend`, simulators/shoe.py), so the code
below runs pyusb's real path without hardware.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import usb.core
import usb.util
from tablectl.drivers.transport.base import TransportClosed, TransportUnavailable

SCHEME = "usb:"
READ_SIZE = 512


@dataclass(frozen=True, slots=True)
class UsbAddress:
    vendor_id: int
    product_id: int
    serial_number: str | None = None

    @classmethod
    def parse(cls, text: str) -> UsbAddress:
        """`usb:VVVV:PPPP` or `usb:VVVV:PPPP:SERIAL` (hexadecimal ids)."""
        parts = text.removeprefix(SCHEME).split(":", 2)
        try:
            if not text.startswith(SCHEME) or len(parts) < 2:
                raise ValueError
            vid, pid = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            raise ValueError(f"{text!r}: write usb:VVVV:PPPP or usb:VVVV:PPPP:SERIAL") from None
        if not (0 <= vid <= 0xFFFF and 0 <= pid <= 0xFFFF):
            raise ValueError(f"{text!r}: vendor and product ids are 16-bit")
        return cls(vid, pid, parts[2] if len(parts) > 2 and parts[2] else None)

    def __str__(self) -> str:
        tail = f":{self.serial_number}" if self.serial_number else ""
        return f"{SCHEME}{self.vendor_id:04x}:{self.product_id:04x}{tail}"


class UsbConnector:
    def __init__(self, address: UsbAddress, *, backend: Any = None, read_timeout_ms: int = 10):
        self.address = address
        self.backend = backend  # None: pyusb's default (libusb)
        self.read_timeout_ms = read_timeout_ms

    @property
    def description(self) -> str:
        return str(self.address)

    async def connect(self) -> UsbConnection:
        return await asyncio.to_thread(self._open, asyncio.get_running_loop())

    def _open(self, loop: asyncio.AbstractEventLoop) -> UsbConnection:
        a = self.address
        try:
            found = list(
                usb.core.find(
                    find_all=True,
                    idVendor=a.vendor_id,
                    idProduct=a.product_id,
                    backend=self.backend,
                )
            )
        except (usb.core.NoBackendError, usb.core.USBError) as exc:
            raise TransportUnavailable(f"{a}: {exc}") from exc
        dev = _choose(a, found)
        try:
            dev.set_configuration()
            intf = dev.get_active_configuration()[(0, 0)]
            usb.util.claim_interface(dev, intf.bInterfaceNumber)
            ep_out = usb.util.find_descriptor(
                intf,
                custom_match=lambda e: (
                    usb.util.endpoint_direction(e.bEndpointAddress) == usb.util.ENDPOINT_OUT
                ),
            )
            ep_in = usb.util.find_descriptor(
                intf,
                custom_match=lambda e: (
                    usb.util.endpoint_direction(e.bEndpointAddress) == usb.util.ENDPOINT_IN
                ),
            )
        except usb.core.USBError as exc:
            usb.util.dispose_resources(dev)
            raise TransportUnavailable(f"{a}: {exc}") from exc
        if ep_out is None or ep_in is None:
            usb.util.dispose_resources(dev)
            raise TransportUnavailable(f"{a}: no bulk IN and OUT endpoints")
        return UsbConnection(dev, ep_out, ep_in, str(a), loop, self.read_timeout_ms)


def _serial(dev: Any) -> str | None:
    try:
        return str(dev.serial_number)
    except (usb.core.USBError, ValueError):
        return None


def _choose(a: UsbAddress, found: list[Any]) -> Any:
    """The configured device; else the one device of its model (a replacement, which the
    link identifies and the core holds for acceptance). 14.6: the serial number names the
    device we expect, it does not hide the one a technician put in its place."""
    if not found:
        raise TransportUnavailable(f"{a}: no such device")
    if a.serial_number is not None:
        for dev in found:
            if _serial(dev) == a.serial_number:
                return dev
    if len(found) == 1:
        return found[0]
    serials = ", ".join(sorted(str(_serial(d)) for d in found))
    which = "none is " + a.serial_number if a.serial_number else "the port names none"
    raise TransportUnavailable(
        f"{a}: {len(found)} devices of this model ({serials}) and {which}: unplug the one "
        "that is not this table's, or name the right one in the port (usb:VVVV:PPPP:SERIAL)"
    )


class UsbConnection:
    def __init__(
        self,
        dev: Any,
        ep_out: Any,
        ep_in: Any,
        description: str,
        loop: asyncio.AbstractEventLoop,
        read_timeout_ms: int,
    ) -> None:
        self._dev, self._ep_out, self._ep_in = dev, ep_out, ep_in
        self._description = description
        self._loop = loop
        self._read_timeout_ms = read_timeout_ms
        self._inbox: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
        self._receive: Callable[[bytes], None] | None = None  # push_to's
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()  # None: stop
        self._stop = threading.Event()
        self._ended = threading.Lock()  # the first failure ends the connection, once
        self._failed = False
        self._closed = False
        self._reader = threading.Thread(target=self._read, name=f"usb {description} in")
        self._writer = threading.Thread(target=self._write, name=f"usb {description} out")
        self._reader.daemon = self._writer.daemon = True
        self._reader.start()
        self._writer.start()

    @property
    def description(self) -> str:
        return self._description

    def _hand(self, item: bytes | BaseException) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed under us
            self._loop.call_soon_threadsafe(self._arrived, item)

    def _arrived(self, item: bytes | BaseException) -> None:
        """On the loop: a chunk to the receiver push_to() named, else (and an end) to read()."""
        receive = self._receive
        if receive is None or isinstance(item, BaseException):
            self._inbox.put_nowait(item)
            return
        try:
            receive(item)
        except Exception as exc:  # noqa: BLE001 - a bug above: read() raises it, as it was
            self._inbox.put_nowait(exc)

    def push_to(self, receive: Callable[[bytes], None]) -> None:
        """From now on hand what arrives to receive, on the loop (what was queued first)."""
        queued: list[bytes | BaseException] = []
        while not self._inbox.empty():
            queued.append(self._inbox.get_nowait())
        self._receive = receive
        for item in queued:
            self._arrived(item)

    def _fail(self, exc: usb.core.USBError) -> None:
        with self._ended:
            if self._failed or self._stop.is_set():
                return
            self._failed = True
        gone = exc.errno == errno.ENODEV
        self._hand(TransportClosed(f"{self._description}: {'unplugged' if gone else exc}"))

    def _write(self) -> None:
        """The writer: each request goes out as soon as the loop queues it."""
        try:
            while (data := self._outbox.get()) is not None:
                self._ep_out.write(data)
        except usb.core.USBError as exc:
            self._fail(exc)

    def _read(self) -> None:
        """The reader: what the device sends, handed to the loop as it arrives."""
        try:
            while not self._stop.is_set():
                try:
                    chunk = self._ep_in.read(READ_SIZE, timeout=self._read_timeout_ms)
                except usb.core.USBTimeoutError:
                    continue
                if len(chunk):
                    self._hand(bytes(chunk))
        except usb.core.USBError as exc:
            self._fail(exc)

    async def read(self) -> bytes:
        if self._closed:
            raise TransportClosed(f"{self._description} closed")
        item = await self._inbox.get()
        if isinstance(item, BaseException):
            self._closed = True
            raise item
        return item

    def write(self, data: bytes) -> None:
        if self._closed or self._failed or not self._writer.is_alive():
            raise TransportClosed(f"{self._description} closed")
        self._outbox.put(data)

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        self._closed = True
        self._stop.set()
        self._outbox.put(None)
        await asyncio.to_thread(self._writer.join)
        await asyncio.to_thread(self._reader.join)
        with contextlib.suppress(usb.core.USBError):
            usb.util.dispose_resources(self._dev)
