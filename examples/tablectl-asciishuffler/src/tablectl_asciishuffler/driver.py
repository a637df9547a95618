"""The ACME line shuffler's driver for tablectl: it imports tablectl's public driver API only.

One connection at a time (socket://HOST:PORT), one request at a time; the device is polled
(`ST BOOT ACK`) and its events become the core's inputs in order, each carrying the cursor
(boot, event id) the table journals with it; the next poll acknowledges them only after
`acknowledge` says they are on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, field_validator
from tablectl.drivers.api import (
    CommandRefused,
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceReport,
    DeviceReportConflict,
    Driver,
    DriverContext,
    DriverSettings,
    Event,
    FirstWord,
    LinkDown,
    LinkError,
    ResetRefused,
    ShuffleCompleted,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
)

from tablectl_asciishuffler import protocol as p

DEVICE = "shuffler"
SCHEME = "socket://"
REMEMBERED = 1024  # events of this boot kept to tell a replay from a conflict


class AsciiSettings(DriverSettings):
    """`[shuffler]` keys of this driver (besides the table's own)."""

    port: str = Field(min_length=1, description="socket://HOST:PORT")
    line_timeout_ms: int = Field(default=200, ge=20, le=5000)
    retries: int = Field(default=2, ge=0, le=10)
    poll_interval_ms: int = Field(default=150, ge=20, le=2000)
    missed_polls_for_link_down: int = Field(default=3, ge=1, le=20)

    @field_validator("port")
    @classmethod
    def _socket(cls, port: str) -> str:
        host, _, number = port.removeprefix(SCHEME).rpartition(":")
        if not port.startswith(SCHEME) or not host or not number.isdigit():
            raise ValueError(f"{port[:80]!r}: write socket://HOST:PORT")
        if not 0 < int(number) < 65536:
            raise ValueError(f"{port[:80]!r}: the port number is 1 to 65535")
        return port


class Timeout(LinkError):
    def __init__(self, verb: str, tries: int) -> None:
        super().__init__(f"no answer to {verb} after {tries} tries")


class _Session:
    """One connection's exchange: a line out, the line with its SEQ back."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        settings: AsciiSettings,
        seq: int,
        counters: dict[str, int],
        on_reboot_notice: Callable[[], None],
    ) -> None:
        self._reader, self._writer = reader, writer
        self._settings = settings
        self.seq = seq
        self._counters = counters
        self._lines = p.LineReader()
        self._pending: tuple[int, asyncio.Future[p.Line]] | None = None
        self._lock = asyncio.Lock()
        self._on_reboot_notice = on_reboot_notice
        self.closed = False

    async def read_forever(self) -> None:
        try:
            while data := await self._read():
                for line in self._lines.feed(data):
                    self._dispatch(line)
                self._counters["bad_lines"] = self._lines.bad_lines
        finally:
            self.closed = True
            if self._pending is not None and not self._pending[1].done():
                self._pending[1].set_exception(LinkDown(DEVICE, "the connection closed"))

    async def _read(self) -> bytes:
        try:
            return await self._reader.read(4096)
        except OSError:
            return b""  # reset by the device: the connection has ended

    def _dispatch(self, line: p.Line) -> None:
        if line.verb == "RB":
            self._on_reboot_notice()
            return
        pending = self._pending
        if pending is None or line.seq != pending[0] or pending[1].done():
            self._counters["unsolicited"] += 1
            return
        pending[1].set_result(line)

    async def request(self, verb: str, *args: object) -> p.Line:
        async with self._lock:
            if self.closed:
                raise LinkDown(DEVICE, "the connection closed")
            self.seq = p.next_seq(self.seq)
            self._counters["requests"] += 1
            wire = p.encode(self.seq, verb, *args)
            loop = asyncio.get_running_loop()
            try:
                for attempt in range(self._settings.retries + 1):
                    if attempt:
                        self._counters["retransmits"] += 1
                    future: asyncio.Future[p.Line] = loop.create_future()
                    self._pending = (self.seq, future)
                    try:
                        self._writer.write(wire)
                        await self._writer.drain()
                    except OSError as exc:
                        raise LinkDown(DEVICE, str(exc)) from exc
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self._settings.line_timeout_ms / 1000):
                            reply = await future
                        if reply.verb == "NO":
                            raise CommandRefused(DEVICE, verb, " ".join(reply.args) or "no")
                        return reply
            finally:
                self._pending = None
            self._counters["timeouts"] += 1
            raise Timeout(verb, self._settings.retries + 1)


class AsciiShuffler:
    """tablectl.drivers.api.ShufflerDriver (and ShufflerDiagnostics) for the line shuffler."""

    def __init__(self, settings: AsciiSettings, context: DriverContext) -> None:
        self._settings = settings
        self._emit = context.emit
        self._cursor = context.cursor
        self._trace = context.trace
        self._boot: int | None = context.cursor[0] if context.cursor else None
        self._emitted = self._acked = context.cursor[1] if context.cursor else 0
        self._taken: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._refused: set[int] = set()
        self._conflicts: set[tuple[int, int]] = set()
        self._fault_told: tuple[int, str] | None = None
        self._first_status = True
        self._first_word_due = True
        self._on_first_word: Callable[[FirstWord], None] | None = None
        self._held_since_start = 0
        self._status: p.Status | None = None
        self._identity: tuple[str, str, str] | None = None
        self._session: _Session | None = None
        self._up = False
        self._ready = asyncio.Event()
        self._hurry = asyncio.Event()
        self._since = datetime.now(UTC)
        self._last_error: str | None = None
        self._seq = random.SystemRandom().randrange(p.SEQ_MAX + 1)
        self.counters = {
            "requests": 0,
            "retransmits": 0,
            "timeouts": 0,
            "bad_lines": 0,
            "unsolicited": 0,
            "events_replayed": 0,
            "events_refused": 0,
            "events_conflicting": 0,
            "reboots": 0,
            "reconnects": 0,
        }

    # --- the table's side ------------------------------------------------------------------

    @property
    def link_up(self) -> bool:
        return self._up

    async def wait_link_up(self) -> None:
        await self._ready.wait()

    @property
    def boot_id(self) -> int | None:
        return self._boot

    def on_first_word(self, callback: Callable[[FirstWord], None]) -> None:
        self._on_first_word = callback

    @property
    def first_word_due(self) -> bool:
        return self._first_word_due

    def acknowledge(self, report: DeviceReport) -> None:
        if report.boot_id == self._boot and report.event_id is not None:
            self._acked = max(self._acked, report.event_id)

    def fault_showing(self) -> Event | None:
        s = self._status
        if not self._up or s is None or s.state != "fault":
            return None
        return ShufflerFault(code=p.FAULTS.get(s.fault) or "fault", from_status=True)

    def reset_point(self) -> tuple[int, int, int]:
        s = self._status
        if not self._up or s is None or self._boot is None:
            raise ResetRefused("the shuffler link is down: nothing to reset")
        if self._boot not in self._refused:
            raise ResetRefused("the shuffler's events are not refused: nothing to reset")
        held = [e.event_id for e in s.events if e.event_id > self._emitted]
        if not held:
            raise ResetRefused("the shuffler holds no refused event now: poll again")
        return self._boot, self._acked, max(held)

    def reset_to(self, boot_id: int, event_id: int) -> None:
        if boot_id == self._boot:
            self._emitted = self._acked = max(self._acked, event_id)
            self._refused.discard(boot_id)

    def health(self) -> dict[str, Any]:
        ident = self._identity
        return {
            "link": "up" if self._up else "down",
            "link_since": self._since.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "port": self._settings.port,
            "connection": "connected" if self._session else "reconnecting",
            "last_error": self._last_error,
            "boot_id": self._boot,
            "state": None if self._status is None else self._status.state,
            "model": ident[0] if ident else None,
            "serial_number": ident[1] if ident else None,
            "firmware": ident[2] if ident else None,
            "event_cursor": self._acked,
            "card_count": None if self._status is None else self._status.count,
            **self.counters,
        }

    # --- commands --------------------------------------------------------------------------

    async def _command(self, verb: str, *args: object) -> p.Line:
        session = self._session
        if session is None or not self._up:
            raise LinkDown(DEVICE)
        return await session.request(verb, *args)

    async def shuffle(self) -> None:
        reply = await self._command("SH")
        if reply.verb != "OK":
            raise LinkError(f"SH answered with {reply.verb}")
        self._hurry.set()

    async def deck_loaded(self) -> tuple[str, str] | None:
        return None  # this shuffler does not report its deck

    async def count_deck(self) -> tuple[int, int]:
        reply = await self._command("CT")
        if reply.verb != "CT" or len(reply.args) != 2 or not all(a.isdigit() for a in reply.args):
            raise LinkError(f"CT answered with {reply.verb} {' '.join(reply.args)}")
        return int(reply.args[0]), int(reply.args[1])

    async def self_test(self) -> tuple[bool, str]:
        reply = await self._command("TS")
        if reply.verb != "TS" or not reply.args:
            raise LinkError(f"TS answered with {reply.verb}")
        return reply.args[0] == "PASS", " ".join(reply.args[1:])

    def wind_seq(self, seq: int) -> None:
        """The next request takes seq + 1 (the conformance kit: a wrap soon)."""
        self._seq = seq
        if self._session is not None:
            self._session.seq = seq

    # --- the connection --------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, and connect again (backing off) for as long as the table runs."""
        delay = 0.05
        host, _, port = self._settings.port.removeprefix(SCHEME).rpartition(":")
        while True:
            try:
                async with asyncio.timeout(2):
                    reader, writer = await asyncio.open_connection(host, int(port))
            except (OSError, TimeoutError) as exc:
                self._last_error = str(exc) or type(exc).__name__
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
                continue
            delay = 0.05
            try:
                await self._serve(reader, writer)
            except (LinkError, OSError, p.LineError) as exc:
                self._last_error = str(exc)
            finally:
                self._session = None
                self._set_up(False)
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            self.counters["reconnects"] += 1
            await asyncio.sleep(delay)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = _Session(
            reader, writer, self._settings, self._seq, self.counters, self._hurry.set
        )
        self._session = session
        # Not a TaskGroup: its ExceptionGroup would hide the LinkDown that run() handles.
        reading = asyncio.get_running_loop().create_task(
            session.read_forever(), name="asciishuffler-read"
        )
        try:
            await self._poll_forever(session)
        finally:
            self._seq = session.seq
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading

    async def _poll_forever(self, session: _Session) -> None:
        s = self._settings
        await self._identify(session)
        self._take(await self._poll(session), connected=True)
        self._set_up(True)
        missed = 0
        while True:
            self._hurry.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(s.poll_interval_ms / 1000 * (1 + min(missed, 5))):
                    await self._hurry.wait()
            if session.closed:
                raise LinkDown(DEVICE, "the connection closed")
            try:
                status = await self._poll(session)
            except Timeout:
                missed += 1
                if missed >= s.missed_polls_for_link_down:
                    self._set_up(False)
                continue
            except (CommandRefused, p.LineError):
                continue
            if missed >= s.missed_polls_for_link_down:
                await self._identify(session)  # back after silence: the same device?
                self._take(status, connected=True)
                self._set_up(True)
            else:
                self._take(status, connected=False)
            missed = 0

    async def _identify(self, session: _Session) -> None:
        reply = await session.request("HI")
        if reply.verb != "ID" or len(reply.args) != 3:
            raise LinkError(f"HI answered with {reply.verb}")
        model, serial, firmware = reply.args
        self._identity = (model, serial, firmware)
        self._emit(
            DeviceReport(
                DEVICE,
                DeviceIdentified(
                    device=DEVICE, model=model, serial_number=serial, firmware=firmware
                ),
            )
        )

    async def _poll(self, session: _Session) -> p.Status:
        reply = await session.request("ST", self._boot or 0, self._acked)
        return p.decode_status(reply)

    def _set_up(self, up: bool) -> None:
        if up != self._up:
            self._since = datetime.now(UTC)
        self._up = up
        if up:
            self._ready.set()
        else:
            self._ready.clear()

    # --- events ----------------------------------------------------------------------------

    def _take(self, status: p.Status, *, connected: bool) -> None:
        self._status = status
        boot = status.boot
        if boot != self._boot:
            known = self._boot is not None
            self._boot = boot
            self._emitted = self._acked = 0
            self._taken.clear()
            if known:
                self.counters["reboots"] += 1
                self._emit(DeviceReport(DEVICE, ShufflerRebooted(), boot, 0))
        stale, self._first_status = self._first_status, False
        has_fault_event = any(e.kind == "FLT" for e in status.events)
        if status.state != "fault":
            self._fault_told = None
        elif not has_fault_event and self._fault_told != (boot, status.fault):
            self._fault_told = (boot, status.fault)
            code = p.FAULTS.get(status.fault) or "fault"
            self._emit(
                DeviceReport(
                    DEVICE,
                    ShufflerFault(code=code, at_connect=connected, from_status=not connected),
                )
            )
        taken = 0
        for event in sorted(status.events, key=lambda e: e.event_id):
            if event.event_id <= self._emitted:
                self._replayed(boot, event)
                continue
            core = self._input(event, stale=stale)
            if event.event_id != self._emitted + 1 or core is None:
                self._refuse(boot, event)
                break
            self._emitted = event.event_id
            self._taken[event.event_id] = (event.kind, event.arg)
            while len(self._taken) > REMEMBERED:
                self._taken.popitem(last=False)
            if event.kind == "FLT":
                self._fault_told = (boot, status.fault)
            self._emit(DeviceReport(DEVICE, core, boot, event.event_id))
            taken += 1
        self._held_since_start += taken
        if self._first_word_due and not status.events:
            self._first_word_due = False
            if self._on_first_word is not None:
                self._on_first_word(
                    FirstWord(
                        device=DEVICE,
                        boot_id=boot,
                        cursor_boot_id=self._cursor[0] if self._cursor else None,
                        state=status.state,
                        acting=status.state == "busy",
                        events_held=self._held_since_start,
                    )
                )

    @staticmethod
    def _input(event: p.Event, *, stale: bool) -> Event | None:
        match event.kind:
            case "STA":
                return ShuffleStarted(stale=stale)
            case "END" if event.arg.isdigit():
                return ShuffleCompleted(card_count=int(event.arg), stale=stale)
            case "FLT" if event.arg in p.FAULTS and event.arg != "-":
                return ShufflerFault(code=p.FAULTS[event.arg] or "fault", stale=stale)
        return None

    def _replayed(self, boot: int, event: p.Event) -> None:
        taken = self._taken.get(event.event_id)
        if taken is None or taken == (event.kind, event.arg):
            self.counters["events_replayed"] += 1
            return
        self.counters["events_conflicting"] += 1
        if (boot, event.event_id) in self._conflicts:
            return
        self._conflicts.add((boot, event.event_id))
        self._emit(
            DeviceReport(
                DEVICE,
                DeviceReportConflict(
                    device=DEVICE, boot_id=boot, event_id=event.event_id, kind=p.KINDS[event.kind]
                ),
            )
        )

    def _refuse(self, boot: int, event: p.Event) -> None:
        self.counters["events_refused"] += 1
        if boot in self._refused:
            return
        self._refused.add(boot)
        self._emit(
            DeviceReport(
                DEVICE,
                DeviceEventsRefused(
                    device=DEVICE,
                    boot_id=boot,
                    event_id=event.event_id,
                    expected_event_id=self._emitted + 1,
                    kind=p.KINDS[event.kind],
                ),
            )
        )


def make_shuffler(settings: Any, context: DriverContext) -> AsciiShuffler:
    assert isinstance(settings, AsciiSettings)
    return AsciiShuffler(settings, context)


DRIVER = Driver(
    name="asciishuffler",
    description="ACME line shuffler: ASCII lines, additive checksum, SEQ 0..999",
    settings={"shuffler": AsciiSettings},
    shuffler=make_shuffler,
    # Its simulator, as tablectl's conformance kit drives it (`tablectl test driver`).
    simulator="tablectl_asciishuffler.kit:shuffler",
)
