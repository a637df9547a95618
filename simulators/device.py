"""What every simulated reference device shares: the wire, the reply cache, events, identity.

A simulated device is built from the production codec. It is reached in-process (plugged into
a `MemoryPort`, or behind the virtual USB backend), on a real pseudo-terminal, or over TCP.
Its faults are the knobs in simulators/faults.py.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import tty
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import structlog
from tablectl.drivers.reference.framing import Frame, FrameParser
from tablectl.drivers.reference.messages import (
    MAX_EVENT_ID,
    DeviceEvent,
    Identity,
    MsgType,
    NakReason,
    ProtocolError,
    Status,
    decode_poll,
    encode_ident,
    encode_status,
)
from tablectl.simulators.faults import LineFaults, ProtocolFaults

from tablectl.util.clock import monotonic_ms

log = structlog.get_logger(__name__)
MAX_EVENTS_PER_STATUS = 20


def _discard(data: bytes) -> None:
    """Where replies go while nothing is attached."""


class SimulatedDevice:
    def __init__(
        self, identity: Identity, *, address: int = 1, rng: random.Random | None = None
    ) -> None:
        self.identity = identity
        self.address = address
        self.rng = rng or random.Random()
        self.line = LineFaults()
        self.lies = ProtocolFaults()
        self.parser = FrameParser()
        self.requests_executed = 0
        self._send: Callable[[bytes], None] = _discard
        self._master_fd: int | None = None
        self._slave_fd: int | None = None
        self._pty_link: weakref.finalize[Any, Any] | None = None  # its private port path
        self._tasks: set[asyncio.Task[None]] = set()
        self._connections: set[asyncio.StreamWriter] = set()  # TCP hosts (serve_tcp)
        self.history: list[tuple[int, DeviceEvent]] = []  # (boot id, event): all it reported
        self._reboot_state()

    def _reboot_state(self, *, keep_boot_id: bool = False) -> None:
        if not keep_boot_id:
            self.boot_id = self.rng.getrandbits(32) or 1
        self.events: list[DeviceEvent] = []
        self._next_event_id = 1
        self._cache: tuple[Frame, bytes] | None = None  # (request, reply bytes)
        self._restate: DeviceEvent | None = None  # an acknowledged event, to report again

    # --- what a device type provides ---------------------------------------------------

    def status(self) -> Status:
        raise NotImplementedError

    def command(self, request: Frame) -> Frame:
        """A request other than POLL and IDENTIFY."""
        return self.nak(request, NakReason.UNKNOWN_TYPE)

    # --- knobs --------------------------------------------------------------------------

    def reboot(self, *, keep_boot_id: bool = False) -> None:
        """Power cycle: a new boot id, event ids from 1, unacknowledged events lost.
        keep_boot_id: a faulty restart that keeps the boot id (a watchdog reset whose firmware
        does not draw a new one): its ids start at 1 below the host's acknowledgement, so it
        drops its own new events on the host's next POLL."""
        for task in self._tasks:
            task.cancel()
        self._reboot_state(keep_boot_id=keep_boot_id)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def event(self, kind: int, arg: int = 0) -> None:
        lies = self.lies
        if lies.gap_next_event:
            lies.gap_next_event = False
            self._next_event_id += 1
        event_id = self._next_event_id
        if lies.absurd_next_event:
            lies.absurd_next_event = False
            event_id = MAX_EVENT_ID
        elif lies.reuse_id_next_event is not None and lies.reuse_kind in (None, kind):
            event_id, lies.reuse_id_next_event = lies.reuse_id_next_event, None
            lies.reuse_kind = None
        else:
            self._next_event_id += 1
        event = DeviceEvent(event_id, kind, arg)
        self.events.append(event)
        self.history.append((self.boot_id, event))
        if lies.restate_next_event is not None and lies.restate_kind in (None, kind):
            self._restate = DeviceEvent(event_id, kind, lies.restate_next_event)
            lies.restate_next_event = lies.restate_kind = None

    # --- the wire -----------------------------------------------------------------------

    def attach(self, send: Callable[[bytes], None] | None) -> None:
        self._send = send or _discard

    def write_raw(self, data: bytes) -> None:
        """Put bytes on the line as they are (noise, partial frames)."""
        self._send(data)

    def receive(self, data: bytes) -> None:
        for frame in self.parser.feed(data, monotonic_ms()):
            if frame.addr != self.address:
                continue
            # The same request (every field, so the same bytes) is a retry.
            if self._cache is not None and self._cache[0] == frame:
                reply = self._cache[1]  # a retry: answer again, execute nothing
            else:
                reply = self._execute(frame).encode()
                self._cache = (frame, reply)
            for part in self.line(reply):
                self._send(part)

    def reply(self, request: Frame, mtype: MsgType, payload: bytes = b"") -> Frame:
        return Frame(self.address, request.seq, mtype, payload)

    def nak(self, request: Frame, reason: NakReason) -> Frame:
        return self.reply(request, MsgType.NAK, bytes([reason]))

    def _execute(self, request: Frame) -> Frame:
        self.requests_executed += 1
        if self.lies.nak_next > 0:
            self.lies.nak_next -= 1
            return self.nak(request, self.lies.nak_reason)
        if request.type == MsgType.POLL and self.lies.nak_polls > 0:
            self.lies.nak_polls -= 1
            return self.nak(request, self.lies.nak_reason)
        if request.type == MsgType.POLL:
            try:
                boot_id, ack = decode_poll(request.payload)
            except ProtocolError:
                return self.nak(request, NakReason.BAD_LENGTH)
            if self.events and boot_id == self.boot_id and not self.lies.ignore_acks:
                self.events = [e for e in self.events if e.event_id > ack]
            events = self.events[:MAX_EVENTS_PER_STATUS]
            restate = self._restate
            if restate is not None and boot_id == self.boot_id and restate.event_id <= ack:
                events = [restate, *events]  # "again": the same id, another report
                self._restate = None
            if self.lies.reorder_events:
                events = events[::-1]
            s = self.status()
            status = Status(
                s.state, s.fault, s.card_count, s.expected_count, self.boot_id, tuple(events)
            )
            return self.reply(request, MsgType.STATUS, encode_status(status))
        if request.type == MsgType.IDENTIFY:
            return self.reply(request, MsgType.IDENT, encode_ident(self.identity))
        return self.command(request)

    # --- a real pseudo-terminal, or TCP ---------------------------------------------------

    def open_pty(self) -> str:
        """Serve on a new pseudo-terminal; returns the path the driver opens: a link of
        this simulator's own to /dev/pts/N, gone once it closes. The kernel hands N to the
        next pseudo-terminal opened anywhere: a daemon reconnecting by /dev/pts/N after its
        simulator closed could reach another test's simulator and take its events (seen as
        a refused event sequence under a full test run); by the link it finds nothing."""
        master, slave = os.openpty()
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._master_fd, self._slave_fd = master, slave
        asyncio.get_running_loop().add_reader(master, self._on_readable)
        self.attach(self._write_master)
        folder = tempfile.mkdtemp(prefix="tablectl-sim-pty-")
        link = os.path.join(folder, "port")
        os.symlink(os.ttyname(slave), link)
        self._pty_link = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
        return link

    async def serve_tcp(self, host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
        """Serve on TCP, for a driver configured with port = "socket://HOST:PORT"."""

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.attach(writer.write)  # the latest connection is the host
            self._connections.add(writer)
            try:
                while data := await reader.read(4096):
                    self.receive(data)
            except (ConnectionError, asyncio.CancelledError):
                pass  # the host left, or the simulator is closing: the connection ends quietly
            finally:
                self._connections.discard(writer)
                writer.close()

        return await asyncio.start_server(connected, host, port)

    def _write_master(self, data: bytes) -> None:
        if self._master_fd is not None:
            try:
                os.write(self._master_fd, data)
            except BlockingIOError:
                log.warning("simulator pty full: reply dropped")

    def _on_readable(self) -> None:
        assert self._master_fd is not None
        try:
            data = os.read(self._master_fd, 4096)
        except (BlockingIOError, OSError):
            return  # EIO while the host has the port closed; it will reopen
        self.receive(data)

    def hang_up(self) -> None:
        """The cable is pulled: every host's TCP connection ends (a pty: close() it)."""
        for writer in list(self._connections):
            writer.close()
        self.attach(None)

    def close(self) -> None:
        if self._pty_link is not None:
            self._pty_link()  # the path leads nowhere before /dev/pts/N is free again
        for task in self._tasks:
            task.cancel()
        if self._master_fd is not None:
            asyncio.get_running_loop().remove_reader(self._master_fd)
            os.close(self._master_fd)
            self._master_fd = None
        if self._slave_fd is not None:
            os.close(self._slave_fd)
            self._slave_fd = None
        self.attach(None)
