"""The polled-device link every device shares (shuffler, shoe): exchange, polling, events.

`Link` is one connection's exchange: one request at a time, its reply carries the same SEQ; a
silent device is asked again with the same bytes (answered from its reply cache, never
executed twice). A NAK ends that request only: the next request takes the next SEQ, so a
device can never answer every new request from its cache with an old NAK. SEQ numbers run on
across reconnects.

`PolledDevice` keeps a device reachable (through the one `Reconnector`), reads its identity on
every (re)connect, acts on the STATUS it finds (a device already in fault is a fault), polls
it, and turns its events into core inputs in device order. The event cursor is durable: a
report carries (boot, event id) and the daemon stores it in the same transaction as the
input; only then does `acknowledge` let the next POLL tell the device to drop it. Events at or
below the cursor are replays (skipped) unless they say something else than when they were
taken (a conflict: a fault, never a replay); an event that is not the next one is refused,
and the stream stays stopped there until the device reboots or a technician resets the link
(`reset_point`, `reset_to`). A fault the STATUS shows is a fault at any poll, not only on
connect. A connection that closes under a command is a link down (`LinkDown`), never an
exception for the caller to die of.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from tablectl.drivers.api import (
    CommandRefused,
    DeviceReport,
    FirstWord,
    LinkDown,
    LinkError,
    ResetRefused,
)
from tablectl.drivers.reference.framing import (
    INTER_BYTE_GAP_MS,
    Frame,
    FrameParser,
    ParserCounters,
)
from tablectl.drivers.reference.messages import (
    MAX_EVENT_ID,
    DeviceEvent,
    Identity,
    MsgType,
    NakReason,
    ProtocolError,
    Status,
    decode_ident,
    decode_status,
    encode_poll,
    type_name,
)
from tablectl.drivers.transport.base import (
    Connection,
    Connector,
    Pushing,
    TracedConnection,
    TraceWriter,
    TransportError,
)

from tablectl.core.events import DeviceEventsRefused, DeviceIdentified, DeviceReportConflict, Event
from tablectl.util.backoff import Backoff
from tablectl.util.clock import monotonic_ms
from tablectl.util.faultpoint import fault_point
from tablectl.util.reconnect import Permanent, Reconnector

log = structlog.get_logger(__name__)


class LinkTimeout(LinkError):
    def __init__(self, request: Frame, attempts: int) -> None:
        super().__init__(
            f"no reply to {type_name(request.type)} seq {request.seq} after {attempts} tries"
        )
        self.request = request
        self.attempts = attempts

    @property
    def summary(self) -> str:
        return f"no reply to {type_name(self.request.type)} after {self.attempts} tries"


class NakError(CommandRefused):
    """The device answered NAK: `code` is the protocol's reason (NakReason)."""

    def __init__(self, request: Frame, reason: int) -> None:
        name = NakReason(reason).name if reason in NakReason._value2member_map_ else reason
        super().__init__("device", type_name(request.type), str(name))
        self.args = (f"device refused {type_name(request.type)}: {name}",)
        self.request = request
        self.code = reason


class WrongDevice(LinkError, Permanent):
    """What answers does not speak the reference protocol as this device (NAK, bad IDENT)."""


@dataclass
class LinkCounters:
    requests: int = 0
    retransmits: int = 0
    timeouts: int = 0
    naks: int = 0
    unsolicited: int = 0  # verified frames that answer nothing we asked
    bad_replies: int = 0  # verified frames whose payload does not decode
    events_replayed: int = 0  # already journaled (the ack was lost): skipped
    events_refused: int = 0  # out of sequence, absurd id or unknown kind
    events_conflicting: int = 0  # an id taken before, now saying something else
    reboots: int = 0
    identity_reads: int = 0


class SeqCounter:
    """SEQ 1..255, running on across reconnects; starts anywhere, so a restarted host does not
    begin with the very request its predecessor last sent (which the device has cached)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._seq = (rng or random.SystemRandom()).randrange(255)

    def next(self) -> int:
        self._seq = self._seq % 255 + 1
        return self._seq

    def start_at(self, seq: int) -> None:
        """The next request takes seq + 1 (the conformance kit winds it up to the wrap)."""
        self._seq = seq % 255


def _resolve_none(future: asyncio.Future[Any]) -> None:
    """A timer's end: the future waited for nothing more (a reply, a wake-up) in time."""
    if not future.done():
        future.set_result(None)


class Link:
    """One connection's request/response exchange."""

    def __init__(
        self,
        conn: Connection,
        *,
        address: int,
        response_timeout_ms: int,
        retries: int,
        seq: SeqCounter,
        counters: LinkCounters,
        parser_counters: ParserCounters,
    ) -> None:
        self._conn = conn
        self._address = address
        self._timeout_s = response_timeout_ms / 1000
        self._retries = retries
        self._seq = seq
        self.counters = counters
        self.parser = FrameParser(counters=parser_counters)
        self._lock = asyncio.Lock()
        self._pending: tuple[int, asyncio.Future[Frame | None]] | None = None
        self._gap_timer: asyncio.TimerHandle | None = None

    async def read_forever(self) -> None:
        """Feed received bytes to the parser and hand replies to the waiting request: as
        they arrive where the connection pushes them (its read() then only ends), else as
        this task reads them."""
        conn = self._conn
        if isinstance(conn, Pushing):
            conn.push_to(self._received)
        while True:
            self._received(await conn.read())

    def _received(self, data: bytes) -> None:
        for frame in self.parser.feed(data, monotonic_ms()):
            self._dispatch(frame)
        if self._gap_timer is not None:
            self._gap_timer.cancel()
            self._gap_timer = None
        if self.parser.partial:  # a false start byte may hide a reply: look again once quiet
            self._gap_timer = asyncio.get_running_loop().call_later(
                (INTER_BYTE_GAP_MS + 1) / 1000, self._quiet
            )

    def _quiet(self) -> None:
        """No byte since the gap: abandon the partial frame, hand over what it hid."""
        self._gap_timer = None
        for frame in self.parser.expire(monotonic_ms()):
            self._dispatch(frame)

    def _dispatch(self, frame: Frame) -> None:
        pending = self._pending
        if pending is None or frame.seq != pending[0] or frame.addr != self._address:
            self.counters.unsolicited += 1
            log.debug("unsolicited frame", seq=frame.seq, type=frame.type)
            return
        if not pending[1].done():
            pending[1].set_result(frame)

    async def request(self, mtype: MsgType, payload: bytes = b"") -> Frame:
        async with self._lock:
            frame = Frame(self._address, self._seq.next(), mtype, payload)
            wire = frame.encode()
            name = type_name(mtype)
            fault_point("send", name)  # a test's power cut before the request leaves
            self.counters.requests += 1
            loop = asyncio.get_running_loop()
            try:
                for attempt in range(self._retries + 1):
                    if attempt:
                        self.counters.retransmits += 1
                    future: asyncio.Future[Frame | None] = loop.create_future()
                    self._pending = (frame.seq, future)
                    self._conn.write(wire)
                    await self._conn.drain()
                    fault_point("sent", name)  # ... on the line, its reply not read
                    # The reply, or None once the response time is up: a timer resolves the
                    # future (asyncio.timeout would raise and catch a cancellation instead).
                    timer = loop.call_later(self._timeout_s, _resolve_none, future)
                    try:
                        reply = await future
                    finally:
                        timer.cancel()
                    if reply is None:
                        continue
                    if reply.type == MsgType.NAK:
                        self.counters.naks += 1
                        raise NakError(frame, reply.payload[0] if reply.payload else 0)
                    fault_point("reply", name)  # ... answered, the answer not acted on
                    return reply
            finally:
                self._pending = None
            self.counters.timeouts += 1
            raise LinkTimeout(frame, self._retries + 1)


class DeviceCodec(Protocol):
    """What makes a polled device a shuffler or a shoe: its events and faults as core inputs."""

    @property
    def device(self) -> str: ...

    def event_input(self, event: DeviceEvent, *, stale: bool) -> Event | None:
        """The core input for one device event; None for a kind this codec does not know."""
        ...

    def is_fault_event(self, event: DeviceEvent) -> bool: ...

    def fault_input(self, status: Status, *, at_connect: bool) -> Event | None:
        """The STATUS says the device is in fault (read on connect, or at a later poll):
        that fault's input; None when it is not in fault."""
        ...

    def rebooted_input(self) -> Event: ...

    def state_name(self, state: int) -> str: ...

    def acting(self, state: int) -> bool:
        """The device is carrying out a command (dealing, shuffling)."""
        ...

    def awaited(self, state: int) -> bool:
        """The table waits on what the device is doing (the shoe dealing: the round waits for
        every hand): poll at the fast cadence until it is done."""
        ...


@dataclass(frozen=True, slots=True)
class LinkSettings:
    address: int = 1
    poll_interval_ms: int = 150
    response_timeout_ms: int = 250
    retries: int = 3
    missed_polls_for_link_down: int = 3
    max_backoff_s: float = 1.0  # the link is back within this of the device answering


def _counts(counters: LinkCounters | ParserCounters) -> dict[str, int]:
    """The counters by name, in their order (dataclasses.asdict, without its deep copy)."""
    return {f.name: getattr(counters, f.name) for f in fields(counters)}


TAKEN_REMEMBERED = 1024  # events of this boot kept to tell a replay from a conflict
# The poll cadence while a device's events come (a shuffle's): they are heard within it.
FAST_POLL_S = 0.010
# The cadence while the table waits on what the device is doing (the shoe dealing: the round
# waits for every hand): the last card of a deal waits at most this for its poll (issue 29:
# last card -> every hand known <= 8 ms at p99, bench/shoe_latency.py). A poll and its STATUS
# take well under a millisecond on USB; a deal of 21 cards at 5 ms a card polls about 35
# times instead of 10.
AWAITED_POLL_S = 0.003


@dataclass
class PolledDevice:
    codec: DeviceCodec
    connector: Connector
    emit: Callable[[DeviceReport], None]
    settings: LinkSettings = field(default_factory=LinkSettings)
    cursor: tuple[int, int] | None = None  # (boot id, event id) last journaled
    trace: TraceWriter | None = None
    seq: SeqCounter = field(default_factory=SeqCounter)

    def __post_init__(self) -> None:
        self.counters = LinkCounters()
        self.parser_counters = ParserCounters()
        self.identity: Identity | None = None
        self.link_up = False
        self.last_state: str | None = None
        self._link: Link | None = None
        self._link_ready = asyncio.Event()
        self._hurry = False  # poll_soon: poll at the fast cadence now
        self._wake: asyncio.Future[None] | None = None  # the pause poll_soon ends
        self._boot_id: int | None = self.cursor[0] if self.cursor else None
        # Emitted: handed to the daemon (maybe not yet journaled). Acked: journaled.
        self._emitted = self._acked = self.cursor[1] if self.cursor else 0
        self._first_status = True  # events found before our first poll predate this start
        self._refusal_reported: set[int] = set()  # boots whose refusal the core has heard
        self._conflicts_reported: set[tuple[int, int]] = set()  # (boot, event id)
        # (boot, fault code) the core has heard of, while the device shows it; None once
        # the device leaves its fault, so the same fault later is news again.
        self._fault_reported: tuple[int, int] | None = None
        self._taken: OrderedDict[int, tuple[int, int]] = OrderedDict()  # id -> (kind, arg)
        self._last_status: Status | None = None
        # Told once, at the first STATUS that lists no event (every event it held before
        # this start journaled and acknowledged): what it said first (service/recovery.py).
        self._on_first_word: Callable[[FirstWord], None] | None = None
        self._first_word_due = True
        self._taken_since_start = 0
        self.link_since = datetime.now(UTC)  # when the link last went up or down
        self.reconnector: Reconnector[Connection] = Reconnector(
            name=self.codec.device,
            connect=self._open,
            serve=self._serve,
            close=self._close,
            backoff=Backoff(initial_s=0.1, max_s=self.settings.max_backoff_s),
            retry_on=(OSError, LinkError, ProtocolError),
        )

    @property
    def device(self) -> str:
        return self.codec.device

    # --- what the daemon uses -----------------------------------------------------------

    async def run(self) -> None:
        await self.reconnector.run()

    async def wait_link_up(self) -> None:
        await self._link_ready.wait()

    @property
    def boot_id(self) -> int | None:
        """The device's boot as last read (None: not read since this start, and no cursor)."""
        return self._boot_id

    def on_first_word(self, callback: Callable[[FirstWord], None]) -> None:
        """Call back once, at the first STATUS that lists no event: every event the device
        held when this start began is journaled and acknowledged by then."""
        self._on_first_word = callback

    @property
    def first_word_due(self) -> bool:
        return self._first_word_due

    async def command(self, mtype: MsgType, payload: bytes = b"") -> Frame:
        """Send a command (safe to retry: a repeated SEQ is answered from the device's cache)."""
        link = self._link
        if link is None or not self.link_up:
            raise LinkDown(self.device)
        try:
            return await link.request(mtype, payload)
        except TransportError as exc:
            # The connection closed under the request (unplugged, port gone): the link is
            # down, not the daemon; the reconnect loop brings it back.
            raise LinkDown(self.device, str(exc)) from exc

    def poll_soon(self) -> None:
        """The device took a command the table waits on (a deal): poll at the fast cadence
        now, not at the next slow poll (a deal shorter than the interval would be heard of
        only then)."""
        self._hurry = True
        if self._wake is not None:
            _resolve_none(self._wake)

    def acknowledge(self, report: DeviceReport) -> None:
        """The report is journaled: the next POLL may let the device drop its event."""
        same_boot = report.boot_id is not None and report.boot_id == self._boot_id
        if same_boot and report.event_id is not None and report.event_id > self._acked:
            self._acked = report.event_id

    def fault_showing(self) -> Event | None:
        """The fault the device's last STATUS shows, if it shows one (None when up to date
        and not in fault, or when the link is down: then nothing is known)."""
        if not self.link_up or self._last_status is None:
            return None
        return self.codec.fault_input(self._last_status, at_connect=False)

    def reset_point(self) -> tuple[int, int, int]:
        """Where a reset of a link stuck on refused events would put it: (boot, the last
        event journaled, the last event to skip). Every event the device holds now is
        skipped -- none is taken as its report -- and the link takes what follows."""
        status = self._last_status
        if not self.link_up or status is None or self._boot_id is None:
            raise ResetRefused(f"the {self.device} link is down: nothing to reset")
        if self._boot_id not in self._refusal_reported:
            raise ResetRefused(f"the {self.device}'s events are not refused: nothing to reset")
        held = [e.event_id for e in status.events if e.event_id > self._emitted]
        if not held:
            raise ResetRefused(f"the {self.device} holds no refused event now: poll again")
        last = max(held)
        if last >= MAX_EVENT_ID:
            # Acknowledging 2^32-1 would let the device drop every later event unread.
            raise ResetRefused(
                f"the {self.device} holds event id {last}: its ids cannot go on from there; "
                f"reboot the {self.device}"
            )
        return self._boot_id, self._acked, last

    def reset_to(self, boot_id: int, event_id: int) -> None:
        """The reset is journaled (with the cursor): take the device's events after
        event_id; a later refusal in this boot is news again."""
        if boot_id != self._boot_id:
            return  # it rebooted meanwhile: its ids start over anyway
        self._emitted = self._acked = max(self._acked, event_id)
        self._refusal_reported.discard(boot_id)
        log.warning(f"{self.device} link reset", boot_id=boot_id, skipped_to=event_id)

    def health(self) -> dict[str, Any]:
        ident = self.identity
        return {
            "link": "up" if self.link_up else "down",
            "link_since": self.link_since.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "port": self.connector.description,
            "connection": self.reconnector.state.value,
            "last_error": self.reconnector.last_error,
            "boot_id": self._boot_id,
            "state": self.last_state,
            "model": ident.model if ident else None,
            "serial_number": ident.serial_number if ident else None,
            "firmware": ident.firmware if ident else None,
            "event_cursor": self._acked,
            "reconnects": self.reconnector.counters.drops,
            "card_count": None if self._last_status is None else self._last_status.card_count,
            **_counts(self.counters),
            **_counts(self.parser_counters),
        }

    # --- the session --------------------------------------------------------------------

    async def _open(self) -> Connection:
        conn: Connection = await self.connector.connect()
        if self.trace is not None:
            self.trace.comment(f"connected {self.connector.description}")
            conn = TracedConnection(conn, self.trace)
        return conn

    async def _close(self, conn: Connection) -> None:
        self._link = None
        self._set_link(False)
        await conn.close()

    async def _serve(self, conn: Connection) -> None:
        s = self.settings
        link = Link(
            conn,
            address=s.address,
            response_timeout_ms=s.response_timeout_ms,
            retries=s.retries,
            seq=self.seq,
            counters=self.counters,
            parser_counters=self.parser_counters,
        )
        self._link = link
        try:
            async with asyncio.TaskGroup() as tasks:
                reader = tasks.create_task(link.read_forever(), name=f"{self.device}-read")
                await self._session(link)
                reader.cancel()
        except BaseExceptionGroup as group:
            raise _one_error(group) from None

    async def _identify(self, link: Link) -> None:
        try:
            reply = await link.request(MsgType.IDENTIFY)
        except NakError as exc:
            raise WrongDevice(f"{self.device}: {exc}") from exc
        if reply.type != MsgType.IDENT:
            raise WrongDevice(f"{self.device}: IDENTIFY answered with {type_name(reply.type)}")
        try:
            identity = decode_ident(reply.payload)
        except ProtocolError as exc:
            raise WrongDevice(f"{self.device}: {exc}") from exc
        self.counters.identity_reads += 1
        self.identity = identity
        # Journaled on every connect: the core compares it with the accepted device.
        self.emit(
            DeviceReport(
                self.device,
                DeviceIdentified(
                    device=self.device,
                    model=identity.model,
                    serial_number=identity.serial_number,
                    firmware=identity.firmware,
                ),
            )
        )

    async def _poll(self, link: Link) -> Status:
        reply = await link.request(
            MsgType.POLL, encode_poll(self._boot_id or 0, min(self._acked, MAX_EVENT_ID))
        )
        if reply.type != MsgType.STATUS:
            self.counters.bad_replies += 1
            raise ProtocolError(f"POLL answered with {type_name(reply.type)}", reply.payload)
        try:
            return decode_status(reply.payload)
        except ProtocolError:
            self.counters.bad_replies += 1
            raise

    async def _session(self, link: Link) -> None:
        s = self.settings
        interval_s = s.poll_interval_ms / 1000
        await self._identify(link)
        self._take(await self._first_poll(link), connected=True)
        self._set_link(True)
        missed = 0
        busy: float | None = None  # the fast cadence the next poll keeps, if any
        loop = asyncio.get_running_loop()
        polled_at = loop.time()
        while True:
            if missed:
                await asyncio.sleep(self._poll_backoff(missed))
            else:
                await self._pause(polled_at, interval_s, busy=busy)
            polled_at = loop.time()
            try:
                status = await self._poll(link)
            except LinkTimeout:
                missed += 1
                if missed >= s.missed_polls_for_link_down:
                    self._set_link(False)
                continue
            except NakError as exc:
                # The next POLL takes a new SEQ: a cached NAK can never be the answer again.
                log.warning(f"{self.device} refused a poll", error=str(exc))
                continue
            except ProtocolError as exc:
                log.warning(f"bad {self.device} reply", error=str(exc))
                continue
            if missed >= s.missed_polls_for_link_down:
                # Back after silence: it may be another device, or the same one rebooted.
                await self._identify(link)
                self._take(await self._first_poll(link), connected=True)
                self._set_link(True)
            else:
                before = self._emitted
                self._take(status, connected=False)
                busy = (
                    AWAITED_POLL_S
                    if self.codec.awaited(status.state)
                    else FAST_POLL_S
                    if self._emitted > before
                    else None
                )
            missed = 0

    async def _pause(self, polled_at: float, interval_s: float, *, busy: float | None) -> None:
        """Until the next poll: busy, a fast cadence, while the table waits on the device
        (AWAITED_POLL_S) or its events come (FAST_POLL_S), else the interval or until
        poll_soon (then FAST_POLL_S at the earliest). All count from the last poll's start,
        not its reply, so polls keep their cadence."""
        loop = asyncio.get_running_loop()
        if busy is None and not self._hurry:
            # One future, resolved by the interval's timer or by poll_soon: nothing to cancel
            # and catch at every poll (a timeout around an Event's wait did), and a
            # cancellation of the link's task reaches it as it is.
            wake: asyncio.Future[None] = loop.create_future()
            self._wake = wake
            timer = loop.call_at(polled_at + interval_s, _resolve_none, wake)
            try:
                await wake
            finally:
                timer.cancel()
                self._wake = None
        self._hurry = False
        delay_s = polled_at + (busy or FAST_POLL_S) - loop.time()
        if delay_s > 0:
            await asyncio.sleep(delay_s)

    async def _first_poll(self, link: Link) -> Status:
        """The STATUS right after IDENTIFY; a refused or garbled poll is asked again (new
        SEQ), silence ends the connection."""
        while True:
            try:
                return await self._poll(link)
            except (NakError, ProtocolError) as exc:
                log.warning(f"{self.device} refused a poll", error=str(exc))
                await asyncio.sleep(self.settings.poll_interval_ms / 1000)

    def _poll_backoff(self, missed: int) -> float:
        interval_s = self.settings.poll_interval_ms / 1000
        return float(min(self.settings.max_backoff_s, interval_s * 2 ** min(missed, 6)))

    def _set_link(self, up: bool) -> None:
        if up != self.link_up:
            log.info(f"{self.device} link " + ("up" if up else "down"))
            self.link_since = datetime.now(UTC)
        self.link_up = up
        if up:
            self._link_ready.set()
        else:
            self._link_ready.clear()

    # --- events -------------------------------------------------------------------------

    def _take(self, status: Status, *, connected: bool) -> None:
        """Act on one STATUS: a reboot, a fault it shows, then the new events."""
        self.last_state = self.codec.state_name(status.state)
        self._last_status = status
        boot = status.boot_id
        if boot != self._boot_id:
            known = self._boot_id is not None
            self._boot_id = boot
            self._emitted = self._acked = 0
            self._taken.clear()
            if known:
                # Its event ids start over and whatever it held is unknown: reshuffle.
                self.counters.reboots += 1
                log.warning(f"{self.device} rebooted", boot_id=boot)
                self.emit(DeviceReport(self.device, self.codec.rebooted_input(), boot, 0))
        stale = self._first_status
        self._first_status = False
        self._fault_in_status(status, connected=connected)
        taken = 0
        for event in sorted(status.events, key=_event_id) if status.events else ():
            if event.event_id <= self._emitted:
                self._replayed(boot, event)
                continue
            if event.event_id != self._emitted + 1:
                self._refuse(boot, event)
                break  # what follows a gap cannot be taken in order
            inp = self.codec.event_input(event, stale=stale)
            if inp is None:
                self._refuse(boot, event)
                break
            self._emitted = event.event_id
            self._remember(event)
            if self.codec.is_fault_event(event):
                self._fault_reported = (boot, event.arg)  # STATUS will show it: told once
            self.emit(DeviceReport(self.device, inp, boot, event.event_id))
            taken += 1
        self._taken_since_start += taken
        # Only a STATUS that lists no event says the device holds nothing more: one lists a
        # few events at a time, and lists again those taken but not yet acknowledged.
        if self._first_word_due and not status.events:
            self._first_word_due = False
            if self._on_first_word is not None:
                self._on_first_word(
                    FirstWord(
                        device=self.device,
                        boot_id=boot,
                        cursor_boot_id=self.cursor[0] if self.cursor else None,
                        state=self.codec.state_name(status.state),
                        acting=self.codec.acting(status.state),
                        events_held=self._taken_since_start,
                    )
                )

    def _fault_in_status(self, status: Status, *, connected: bool) -> None:
        """A device in fault is a fault whenever its STATUS says so, event or none (a jam
        shown only in STATUS used to count only on connect); once per boot and fault, and
        again after the device has left it."""
        fault = self.codec.fault_input(status, at_connect=connected)
        if fault is None:
            self._fault_reported = None
            return
        if any(self.codec.is_fault_event(e) for e in status.events):
            return  # the event says it, in order
        if self._fault_reported != (status.boot_id, status.fault):
            self._fault_reported = (status.boot_id, status.fault)
            self.emit(DeviceReport(self.device, fault))

    def _remember(self, event: DeviceEvent) -> None:
        self._taken[event.event_id] = (event.kind, event.arg)
        while len(self._taken) > TAKEN_REMEMBERED:
            self._taken.popitem(last=False)

    def _replayed(self, boot: int, event: DeviceEvent) -> None:
        """An id taken before: a replay if it says the same, a conflict if not."""
        taken = self._taken.get(event.event_id)
        if taken is None or taken == (event.kind, event.arg):
            self.counters.events_replayed += 1  # journaled already, or queued to be
            return
        self.counters.events_conflicting += 1
        log.warning(
            f"{self.device} reported event {event.event_id} again, differently",
            was=taken,
            now=(event.kind, event.arg),
        )
        if (boot, event.event_id) in self._conflicts_reported:
            return
        self._conflicts_reported.add((boot, event.event_id))
        self.emit(
            DeviceReport(
                self.device,
                DeviceReportConflict(
                    device=self.device, boot_id=boot, event_id=event.event_id, kind=event.kind
                ),
            )
        )

    def _refuse(self, boot: int, event: DeviceEvent) -> None:
        """Out of sequence, absurd or unknown: never journaled as the device's event."""
        self.counters.events_refused += 1
        # The device lists it again at every poll until it is acknowledged: warned once a boot.
        say = log.debug if boot in self._refusal_reported else log.warning
        say(
            f"{self.device} event refused",
            event_id=event.event_id,
            expected=self._emitted + 1,
            kind=event.kind,
        )
        if boot in self._refusal_reported:
            return
        self._refusal_reported.add(boot)
        self.emit(
            DeviceReport(
                self.device,
                DeviceEventsRefused(
                    device=self.device,
                    boot_id=boot,
                    event_id=event.event_id,
                    expected_event_id=self._emitted + 1,
                    kind=event.kind,
                ),
            )
        )


def _event_id(event: DeviceEvent) -> int:
    return event.event_id


def _one_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What a session's task group ended with, as the reconnector takes it: the first link or
    transport error (it reconnects), a cancellation first of all (it stops: Python 3.11's
    TaskGroup raises a child's error and drops the parent's cancellation, and a device
    whose cable went as SIGTERM arrived used to reconnect instead, the daemon ending in an
    internal error), anything else as it was (a bug)."""
    task = asyncio.current_task()
    cancelled, rest = group.split(asyncio.CancelledError)
    if cancelled is not None or rest is None or (task is not None and task.cancelling()):
        return asyncio.CancelledError()
    errors = rest.exceptions
    while len(errors) == 1 and isinstance(errors[0], BaseExceptionGroup):
        errors = errors[0].exceptions
    first = errors[0]
    if isinstance(first, TransportError | LinkError | ProtocolError):
        return first
    return group
