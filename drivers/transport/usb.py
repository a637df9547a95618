"""USB bulk transfers through pyusb: one worker thread per device, bridged to asyncio.

pyusb has no asyncio API and its transfers block, so each open device gets one thread that
writes what the loop queued and reads the bulk IN endpoint with a short timeout, handing what
arrives to the loop (`call_soon_threadsafe`). ENODEV (errno 19) means the device was unplugged:
the connection ends and the reconnect loop looks for the device again. The device is found by
vendor id, product id and (when given) serial number, the stable names udev also uses.

Tests use a backend of our own (`usb.backend.IBackend`, simulators/shoe.py), so the code
below runs pyusb's real path without hardware.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import queue
import threading
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

        def ours(dev: Any) -> bool:
            if a.serial_number is None:
                return True
            try:
                return bool(dev.serial_number == a.serial_number)
            except (usb.core.USBError, ValueError):
                return False

        try:
            dev = usb.core.find(
                idVendor=a.vendor_id,
                idProduct=a.product_id,
                custom_match=ours,
                backend=self.backend,
            )
        except (usb.core.NoBackendError, usb.core.USBError) as exc:
            raise TransportUnavailable(f"{a}: {exc}") from exc
        if dev is None:
            raise TransportUnavailable(f"{a}: no such device")
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
        self._outbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=f"usb {description}", daemon=True)
        self._thread.start()

    @property
    def description(self) -> str:
        return self._description

    def _hand(self, item: bytes | BaseException) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed under us
            self._loop.call_soon_threadsafe(self._inbox.put_nowait, item)

    def _work(self) -> None:
        """The device's one thread: write what is queued, read what arrives."""
        try:
            while not self._stop.is_set():
                while True:
                    try:
                        data = self._outbox.get_nowait()
                    except queue.Empty:
                        break
                    self._ep_out.write(data)
                try:
                    chunk = self._ep_in.read(READ_SIZE, timeout=self._read_timeout_ms)
                except usb.core.USBTimeoutError:
                    continue
                if len(chunk):
                    self._hand(bytes(chunk))
        except usb.core.USBError as exc:
            gone = exc.errno == errno.ENODEV
            self._hand(TransportClosed(f"{self._description}: {'unplugged' if gone else exc}"))

    async def read(self) -> bytes:
        if self._closed:
            raise TransportClosed(f"{self._description} closed")
        item = await self._inbox.get()
        if isinstance(item, BaseException):
            self._closed = True
            raise item
        return item

    def write(self, data: bytes) -> None:
        if self._closed or not self._thread.is_alive():
            raise TransportClosed(f"{self._description} closed")
        self._outbox.put(data)

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        self._closed = True
        self._stop.set()
        await asyncio.to_thread(self._thread.join)
        with contextlib.suppress(usb.core.USBError):
            usb.util.dispose_resources(self._dev)
