"""Simulated automated dealing shoe, and a virtual pyusb backend that hosts it.

The shoe holds a deck in order (the shuffler's output, or a deck arranged for a test), deals
the stacks a DEAL asks for one card at a time and reads each card (reference protocol, the
production codec). Its knobs inject every fault the rules name: a jam or a stop mid-deal, a
failure to deal all cards, a card found face up, an unread, duplicate or foreign card, a
stack of the wrong size. It is reached in-process (MemoryPort), on a pty, over TCP, or as a
USB device behind `VirtualUsbBackend`, a `usb.backend.IBackend` of our own: the daemon then
runs pyusb's real code path (find, configuration, bulk transfers, unplug as ENODEV). Its bulk
transfers take the time a USB 2.0 high-speed bus gives them (`BusTiming`): a transfer waits for
the next 125 us microframe and takes one per 13 packets of 512 bytes, so a write is not
instant and a read does not return before its bytes could have crossed the bus.
"""

from __future__ import annotations

import array
import asyncio
import errno
import math
import queue
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import usb.backend
import usb.core
from tablectl.drivers.reference.framing import Frame
from tablectl.drivers.reference.messages import Identity, MsgType, NakReason, ProtocolError, Status
from tablectl.drivers.reference.shoe_codec import (
    UNREAD,
    ShoeEventKind,
    ShoeFaultCode,
    ShoeState,
    card_byte,
    decode_deal,
)
from tablectl.simulators.device import SimulatedDevice

from tablectl.rules.cards import Card, full_deck

IDENTITY = Identity("tablectl-sim-shoe", "SHOE-0001", "1.0")
VENDOR_ID, PRODUCT_ID = 0x1D50, 0x6150  # what config/ and systemd/ name the simulated shoe


@dataclass
class DealFaults:
    """Each applies to the next deal, at the n-th card it dispenses (0 = the first)."""

    jam_at: int | None = None
    stop_at: int | None = None
    face_up_at: set[int] = field(default_factory=set)  # found face up: diverted, not dealt
    unread_at: set[int] = field(default_factory=set)
    duplicate_at: set[int] = field(default_factory=set)  # the previous card, read again
    foreign_at: set[int] = field(default_factory=set)  # a byte that names no card
    extra_card_in_stack: int | None = None  # this stack gets one card too many
    short_by: int = 0  # stop this many cards early and report the deal complete
    dealt_again_face_up_at: int | None = None  # the last card dealt comes again, face up


class ShoeSimulator(SimulatedDevice):
    def __init__(
        self,
        *,
        card_ms: int = 5,
        rng: random.Random | None = None,
        address: int = 1,
        identity: Identity = IDENTITY,
    ) -> None:
        self.card_ms = card_ms
        self.knobs = DealFaults()
        # A shoe fed from a shuffler (`simulate table`): a new shuffled deck is loaded when a
        # deal asks for more cards than are left, instead of running empty.
        self.refill = False
        self.deals = 0
        super().__init__(identity, address=address, rng=rng)
        self.load(self._shuffled())

    def _shuffled(self) -> list[Card]:
        deck = list(full_deck())
        self.rng.shuffle(deck)
        return deck

    def _reboot_state(self, *, keep_boot_id: bool = False) -> None:
        super()._reboot_state(keep_boot_id=keep_boot_id)
        self.state = ShoeState.IDLE
        self.fault = ShoeFaultCode.NONE
        self.dealt = 0
        self.expected = 0

    # --- knobs --------------------------------------------------------------------------

    def load(self, cards: Sequence[Card]) -> None:
        """Put a deck (in dealing order) into the shoe."""
        self.shoe: list[Card] = list(cards)

    def fail(self, code: ShoeFaultCode, *, as_event: bool = True) -> None:
        self.state, self.fault = ShoeState.FAULT, code
        if as_event:
            self.event(ShoeEventKind.FAULT, code)

    def clear(self) -> None:
        """The dealer cleared the shoe: idle again, a fresh shuffled deck inside."""
        self.state, self.fault = ShoeState.IDLE, ShoeFaultCode.NONE
        self.load(self._shuffled())

    # --- the protocol -------------------------------------------------------------------

    def status(self) -> Status:
        return Status(self.state, self.fault, self.dealt, self.expected, self.boot_id)

    def command(self, request: Frame) -> Frame:
        if request.type == MsgType.DEAL:
            try:
                stacks = decode_deal(request.payload)
            except ProtocolError:
                return self.nak(request, NakReason.BAD_PARAMETER)
            if self.state is ShoeState.DEALING:
                return self.nak(request, NakReason.BUSY)
            if self.state is ShoeState.FAULT:
                return self.nak(request, NakReason.ILLEGAL_IN_STATE)
            if self.refill and len(self.shoe) < sum(stacks):
                self.load(self._shuffled())
            self.state, self.dealt, self.expected = ShoeState.DEALING, 0, sum(stacks)
            self.deals += 1
            self.spawn(self._deal(stacks, self.knobs), "sim-deal")
            self.knobs = DealFaults()
            return self.reply(request, MsgType.ACK)
        return super().command(request)

    async def _deal(self, stacks: tuple[int, ...], k: DealFaults) -> None:
        n = 0  # cards dispensed (and face-up ones diverted)
        total = sum(stacks) - k.short_by
        last: int | None = None
        for index, size in enumerate(stacks):
            size += 1 if k.extra_card_in_stack == index else 0
            in_stack = 0
            while in_stack < size:
                if self.dealt >= total:
                    break
                await asyncio.sleep(self.card_ms / 1000)
                if n == k.jam_at:
                    self.fail(ShoeFaultCode.JAM)
                    return
                if n == k.stop_at:
                    self.fail(ShoeFaultCode.STOPPED)
                    return
                if not self.shoe:
                    self.fail(ShoeFaultCode.EMPTY)
                    return
                if n == k.dealt_again_face_up_at and last is not None:
                    n += 1  # a card already dealt, found again face up (a second deck's)
                    self.event(ShoeEventKind.CARD_FACE_UP, last)
                    continue
                card = card_byte(self.shoe.pop(0))
                if n in k.face_up_at:
                    n += 1
                    self.event(ShoeEventKind.CARD_FACE_UP, card)
                    continue
                if n in k.unread_at:
                    card = UNREAD
                elif n in k.foreign_at:
                    card = 0x7E
                elif n in k.duplicate_at and last is not None:
                    card = last
                last = card
                n += 1
                self.dealt += 1
                in_stack += 1
                self.event(ShoeEventKind.CARD, card)
            self.event(ShoeEventKind.STACK_COMPLETE, in_stack)
        self.event(ShoeEventKind.DEAL_COMPLETE, self.dealt)
        self.state = ShoeState.IDLE


# --- a virtual USB bus for pyusb ---------------------------------------------------------

EP_OUT, EP_IN = 0x01, 0x81


@dataclass(frozen=True)
class BusTiming:
    """When a bulk transfer completes on a USB 2.0 high-speed bus (what the descriptors
    below say: bcdUSB 2.00, high speed, 512-byte bulk packets). The host controller schedules
    transfers by 125 us microframe, at most 13 bulk packets of 512 bytes in each."""

    microframe_s: float = 125e-6
    bytes_per_microframe: int = 13 * 512

    def completion(self, nbytes: int, ready_at: float, epoch: float) -> float:
        """The transfer of nbytes that can go at ready_at (submitted, and the data there)
        completes at the end of the microframes it needs, from the next boundary."""
        frames = max(1, math.ceil(nbytes / self.bytes_per_microframe))
        start = epoch + math.ceil((ready_at - epoch) / self.microframe_s) * self.microframe_s
        return start + frames * self.microframe_s


def _until(deadline: float) -> None:
    """Sleep to the transfer's completion (the calling pyusb thread blocks, as libusb's
    synchronous transfers do)."""
    remaining = deadline - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)


def _descriptor(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(extra_descriptors=[], **fields)


class VirtualUsbDevice:
    """A simulated device as the bus sees it: descriptors, strings, two bulk endpoints."""

    def __init__(
        self,
        device: SimulatedDevice,
        loop: asyncio.AbstractEventLoop,
        *,
        vendor_id: int = VENDOR_ID,
        product_id: int = PRODUCT_ID,
        address: int = 1,
    ) -> None:
        self.device = device
        self.loop = loop
        self.strings = {1: "tablectl", 2: device.identity.model, 3: device.identity.serial_number}
        self.desc = _descriptor(
            bLength=18,
            bDescriptorType=1,
            bcdUSB=0x0200,
            bDeviceClass=0xFF,
            bDeviceSubClass=0,
            bDeviceProtocol=0,
            bMaxPacketSize0=64,
            idVendor=vendor_id,
            idProduct=product_id,
            bcdDevice=0x0100,
            iManufacturer=1,
            iProduct=2,
            iSerialNumber=3,
            bNumConfigurations=1,
            address=address,
            bus=1,
            port_number=address,
            port_numbers=(address,),
            speed=3,
        )
        # What the device sent, with when (perf_counter) it reached its IN endpoint.
        self.from_device: queue.Queue[tuple[float, bytes]] = queue.Queue()
        self.leftover = b""  # a reply longer than the last read's buffer
        self.plugged = True
        self.opened = 0

    def attach_to_device(self) -> None:
        """The device's replies go to its IN endpoint (called on the device's loop)."""
        self.device.attach(lambda data: self.from_device.put((time.perf_counter(), data)))


class VirtualUsbBackend(usb.backend.IBackend):  # type: ignore[misc]
    """A pyusb backend whose bus holds simulated devices: plug, unplug, swap them.

    pyusb calls it from the driver's worker thread; the simulated device lives on the event
    loop, so bytes to it are handed over with call_soon_threadsafe and its replies come back
    through a thread-safe queue that bulk_read waits on (a short timeout, like libusb's).
    """

    def __init__(self, timing: BusTiming | None = None) -> None:
        self._lock = threading.Lock()
        self.bus: list[VirtualUsbDevice] = []
        self.timing = timing or BusTiming()
        self._epoch = time.perf_counter()  # the bus's microframe clock starts here

    def plug(
        self, device: SimulatedDevice, loop: asyncio.AbstractEventLoop, **ids: int
    ) -> VirtualUsbDevice:
        vdev = VirtualUsbDevice(device, loop, address=len(self.bus) + 1, **ids)
        with self._lock:
            self.bus.append(vdev)
        return vdev

    def unplug(self, vdev: VirtualUsbDevice) -> None:
        with self._lock:
            vdev.plugged = False
            if vdev in self.bus:
                self.bus.remove(vdev)
        vdev.loop.call_soon_threadsafe(vdev.device.attach, None)

    # --- IBackend ---------------------------------------------------------------------------

    def enumerate_devices(self) -> list[VirtualUsbDevice]:
        with self._lock:
            return list(self.bus)

    def get_device_descriptor(self, dev: VirtualUsbDevice) -> SimpleNamespace:
        return dev.desc

    def get_configuration_descriptor(self, dev: VirtualUsbDevice, config: int) -> SimpleNamespace:
        return _descriptor(
            bLength=9,
            bDescriptorType=2,
            wTotalLength=32,
            bNumInterfaces=1,
            bConfigurationValue=1,
            iConfiguration=0,
            bmAttributes=0x80,
            bMaxPower=50,
        )

    def get_interface_descriptor(
        self, dev: VirtualUsbDevice, intf: int, alt: int, config: int
    ) -> SimpleNamespace:
        if intf != 0 or alt != 0:
            raise IndexError("no such interface")
        return _descriptor(
            bLength=9,
            bDescriptorType=4,
            bInterfaceNumber=0,
            bAlternateSetting=0,
            bNumEndpoints=2,
            bInterfaceClass=0xFF,
            bInterfaceSubClass=0,
            bInterfaceProtocol=0,
            iInterface=0,
        )

    def get_endpoint_descriptor(
        self, dev: VirtualUsbDevice, ep: int, intf: int, alt: int, config: int
    ) -> SimpleNamespace:
        if ep > 1:
            raise IndexError("no such endpoint")
        return _descriptor(
            bLength=7,
            bDescriptorType=5,
            bEndpointAddress=(EP_OUT, EP_IN)[ep],
            bmAttributes=0x02,  # bulk
            wMaxPacketSize=512,
            bInterval=0,
            bRefresh=0,
            bSynchAddress=0,
        )

    def _check(self, dev: VirtualUsbDevice) -> None:
        if not dev.plugged:
            raise usb.core.USBError("No such device", -4, errno.ENODEV)

    def open_device(self, dev: VirtualUsbDevice) -> VirtualUsbDevice:
        self._check(dev)
        dev.opened += 1
        # Whatever a previous host left unread is gone, as on a real re-enumeration.
        while not dev.from_device.empty():
            dev.from_device.get_nowait()
        dev.leftover = b""
        dev.loop.call_soon_threadsafe(dev.attach_to_device)
        return dev

    def close_device(self, dev_handle: VirtualUsbDevice) -> None:
        dev_handle.opened -= 1

    def set_configuration(self, dev_handle: VirtualUsbDevice, config_value: int) -> None:
        self._check(dev_handle)

    def get_configuration(self, dev_handle: VirtualUsbDevice) -> int:
        return 1

    def claim_interface(self, dev_handle: VirtualUsbDevice, intf: int) -> None:
        self._check(dev_handle)

    def release_interface(self, dev_handle: VirtualUsbDevice, intf: int) -> None:
        return None

    def bulk_write(
        self, dev_handle: VirtualUsbDevice, ep: int, intf: int, data: array.array[int], timeout: int
    ) -> int:
        self._check(dev_handle)
        payload = bytes(data)
        _until(self.timing.completion(len(payload), time.perf_counter(), self._epoch))
        self._check(dev_handle)  # unplugged while on the bus
        dev_handle.loop.call_soon_threadsafe(dev_handle.device.receive, payload)
        return len(payload)

    def bulk_read(
        self, dev_handle: VirtualUsbDevice, ep: int, intf: int, buff: array.array[int], timeout: int
    ) -> int:
        self._check(dev_handle)
        submitted = time.perf_counter()
        data, dev_handle.leftover = dev_handle.leftover, b""
        ready = submitted
        if not data:
            try:
                sent_at, data = dev_handle.from_device.get(timeout=max(timeout, 1) / 1000)
            except queue.Empty:
                self._check(dev_handle)
                raise usb.core.USBTimeoutError("Operation timed out", -7, errno.ETIMEDOUT) from None
            ready = max(submitted, sent_at)
        n = min(len(data), len(buff))
        _until(self.timing.completion(n, ready, self._epoch))
        buff[:n] = array.array("B", data[:n])
        dev_handle.leftover = data[n:]  # a longer reply continues in the next transfer
        return n

    def ctrl_transfer(
        self,
        dev_handle: VirtualUsbDevice,
        bmRequestType: int,
        bRequest: int,
        wValue: int,
        wIndex: int,
        data: array.array[int],
        timeout: int,
    ) -> int:
        self._check(dev_handle)
        desc_type, index = wValue >> 8, wValue & 0xFF
        if bRequest != 0x06 or desc_type != 3:
            raise usb.core.USBError("Pipe error", -9, errno.EPIPE)
        if index == 0:
            raw = bytes([4, 3, 0x09, 0x04])  # one language: en-US
        else:
            text = dev_handle.strings.get(index)
            if text is None:
                raise usb.core.USBError("Pipe error", -9, errno.EPIPE)
            body = text.encode("utf-16-le")
            raw = bytes([2 + len(body), 3]) + body
        n = min(len(raw), len(data))
        data[:n] = array.array("B", raw[:n])
        return n

    def clear_halt(self, dev_handle: VirtualUsbDevice, ep: int) -> None:
        return None

    def reset_device(self, dev_handle: VirtualUsbDevice) -> None:
        return None

    def is_kernel_driver_active(self, dev_handle: VirtualUsbDevice, intf: int) -> bool:
        return False

    def detach_kernel_driver(self, dev_handle: VirtualUsbDevice, intf: int) -> None:
        return None

    def attach_kernel_driver(self, dev_handle: VirtualUsbDevice, intf: int) -> None:
        return None
