"""Simulated automated card shuffler: the device side of the reference protocol.

It shuffles a real 52-card deck, counts it, and speaks the production codec over a real
pseudo-terminal. Fault knobs let tests, the demo and technicians provoke every case:
jams, incomplete cycles, a missing card, lost or corrupted replies, line noise, reboots.
"""

from __future__ import annotations

import asyncio
import os
import random
import tty
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
from tablectl.drivers.framing import Frame, FrameParser
from tablectl.drivers.link import monotonic_ms
from tablectl.drivers.protocol import (
    DeviceEvent,
    EventKind,
    FaultCode,
    MsgType,
    NakReason,
    ProtocolError,
    ShufflerState,
    Status,
    decode_poll,
    encode_status,
)

from tablectl.rules.cards import Card, full_deck

log = structlog.get_logger(__name__)
MAX_EVENTS_PER_STATUS = 20


@dataclass
class FaultKnobs:
    jam_next_shuffle: bool = False
    incomplete_next_shuffle: bool = False
    drop_replies: int = 0  # stay silent for the next N requests (the host retries)
    corrupt_replies: int = 0  # flip a CRC byte in the next N replies
    noise_before_reply: bytes = b""  # line noise sent ahead of the next reply


@dataclass
class ShufflerSimulator:
    address: int = 1
    shuffle_ms: int = 200
    rng: random.Random = field(default_factory=random.Random)
    knobs: FaultKnobs = field(default_factory=FaultKnobs)

    def __post_init__(self) -> None:
        self.deck: list[Card] = list(full_deck())
        self.parser = FrameParser()
        self.requests_executed = 0
        self.shuffles = 0
        self._reboot_state()
        self._shuffle_task: asyncio.Task[None] | None = None
        self._write: Callable[[bytes], None] = self._discard
        self._master_fd: int | None = None
        self._slave_fd: int | None = None

    @staticmethod
    def _discard(data: bytes) -> None:
        """Where replies go before a transport is attached."""

    def _reboot_state(self) -> None:
        self.boot_id = self.rng.getrandbits(32) or 1
        self.state = ShufflerState.IDLE
        self.fault = FaultCode.NONE
        self.events: list[DeviceEvent] = []
        self._next_event_id = 1
        self._cache: tuple[bytes, bytes] | None = None  # (request bytes, reply bytes)
        self.last_count = 0

    # --- knobs a test or technician turns ---------------------------------------------

    def remove_card(self) -> Card:
        """Lose a card from the deck (it fell on the floor): the next count is 51."""
        return self.deck.pop(self.rng.randrange(len(self.deck)))

    def load_full_deck(self) -> None:
        self.deck = list(full_deck())

    def reboot(self) -> None:
        if self._shuffle_task:
            self._shuffle_task.cancel()
        self._reboot_state()

    # --- the wire ---------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        for frame in self.parser.feed(data, monotonic_ms()):
            if frame.addr != self.address:
                continue
            raw = frame.encode()
            if self._cache is not None and self._cache[0] == raw:
                reply = self._cache[1]  # a retry: answer again, execute nothing
            else:
                reply = self._execute(frame).encode()
                self._cache = (raw, reply)
            self._send(reply)

    def _send(self, reply: bytes) -> None:
        knobs = self.knobs
        if knobs.drop_replies > 0:
            knobs.drop_replies -= 1
            return
        if knobs.corrupt_replies > 0:
            knobs.corrupt_replies -= 1
            reply = reply[:-1] + bytes([reply[-1] ^ 0xFF])
        if knobs.noise_before_reply:
            reply, knobs.noise_before_reply = knobs.noise_before_reply + reply, b""
        self._write(reply)

    def _reply(self, request: Frame, mtype: MsgType, payload: bytes = b"") -> Frame:
        return Frame(self.address, request.seq, mtype, payload)

    def _nak(self, request: Frame, reason: NakReason) -> Frame:
        return self._reply(request, MsgType.NAK, bytes([reason]))

    def _execute(self, request: Frame) -> Frame:
        self.requests_executed += 1
        if request.type == MsgType.POLL:
            try:
                boot_id, ack = decode_poll(request.payload)
            except ProtocolError:
                return self._nak(request, NakReason.BAD_LENGTH)
            if boot_id == self.boot_id:
                self.events = [e for e in self.events if e.event_id > ack]
            status = Status(
                self.state,
                self.fault,
                self.last_count,
                len(full_deck()),
                self.boot_id,
                tuple(self.events[:MAX_EVENTS_PER_STATUS]),
            )
            return self._reply(request, MsgType.STATUS, encode_status(status))
        if request.type == MsgType.SHUFFLE:
            if self.state is ShufflerState.SHUFFLING:
                return self._nak(request, NakReason.BUSY)
            self._shuffle_task = asyncio.get_running_loop().create_task(
                self._shuffle(), name="sim-shuffle"
            )
            return self._reply(request, MsgType.ACK)
        if request.type == MsgType.IDENTIFY:
            return self._reply(request, MsgType.IDENT, b"tablectl-sim-shuffler/1")
        return self._nak(request, NakReason.UNKNOWN_TYPE)

    def _event(self, kind: EventKind, arg: int = 0) -> None:
        self.events.append(DeviceEvent(self._next_event_id, kind, arg))
        self._next_event_id += 1

    async def _shuffle(self) -> None:
        self.state, self.fault = ShufflerState.SHUFFLING, FaultCode.NONE
        self._event(EventKind.SHUFFLE_STARTED)
        await asyncio.sleep(self.shuffle_ms / 1000)
        for knob, code in (
            ("jam_next_shuffle", FaultCode.JAM),
            ("incomplete_next_shuffle", FaultCode.CYCLE_INCOMPLETE),
        ):
            if getattr(self.knobs, knob):
                setattr(self.knobs, knob, False)
                self.state, self.fault = ShufflerState.FAULT, code
                self._event(EventKind.FAULT, code)
                return
        self.rng.shuffle(self.deck)
        self.shuffles += 1
        self.last_count = len(self.deck)
        self.state = ShufflerState.READY
        self._event(EventKind.SHUFFLE_COMPLETE, self.last_count)

    # --- a real pseudo-terminal -------------------------------------------------------

    def open_pty(self) -> str:
        """Serve on a new pseudo-terminal; returns the path the driver opens (/dev/pts/N)."""
        master, slave = os.openpty()
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._master_fd, self._slave_fd = master, slave
        loop = asyncio.get_running_loop()
        loop.add_reader(master, self._on_readable)
        self._write = self._write_master
        return os.ttyname(slave)

    async def serve_tcp(self, host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
        """Serve on TCP, for a driver configured with port = "socket://HOST:PORT"."""

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._write = writer.write  # the latest connection is the host
            try:
                while data := await reader.read(4096):
                    self.receive(data)
            finally:
                writer.close()

        return await asyncio.start_server(connected, host, port)

    def _write_master(self, data: bytes) -> None:
        if self._master_fd is not None:
            os.write(self._master_fd, data)

    def write_raw(self, data: bytes) -> None:
        """Put bytes on the line as they are (line noise, partial frames)."""
        self._write(data)

    def _on_readable(self) -> None:
        assert self._master_fd is not None
        try:
            data = os.read(self._master_fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            return  # EIO while the host has the port closed; it will reopen
        self.receive(data)

    def close(self) -> None:
        if self._shuffle_task:
            self._shuffle_task.cancel()
        if self._master_fd is not None:
            asyncio.get_running_loop().remove_reader(self._master_fd)
            os.close(self._master_fd)
            self._master_fd = None
        if self._slave_fd is not None:
            os.close(self._slave_fd)
            self._slave_fd = None
