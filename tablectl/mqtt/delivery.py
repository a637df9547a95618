"""Delivery: the journal as the outbox, handed to the broker in seq order, kept until every
registered backend has acknowledged it, and sent again where a backend lacks it.

Rows are handed to the broker at QoS 1 in seq order, up to `publish_window` of them awaiting
their PUBACK at once, and stay outstanding until every registered backend has acknowledged
them end to end on `ack/{backend_id}` (`AckBook`); on every connect delivery starts again
from the lowest acknowledgement. Rows a backend lacks are sent again within a connection
too, paced by its acks: when its ack stalls, or when it asks (redelivery.py decides which).
A row handed to a broker before goes out with `replay: true`, across restarts too
(`HandedMark`); a row larger than the broker accepts goes as a placeholder (withheld.py). A
publish refused, or not acknowledged in time, is a delivery fault: told once per change.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence

import structlog
from pydantic import ValidationError

from tablectl.config import MqttSection
from tablectl.mqtt.client import (
    BrokerUnsuitable,
    MqttClient,
    PacketTooLarge,
    PublishRefused,
    PublishUnacknowledged,
)
from tablectl.mqtt.contract import MeterValue, envelope_json, topic_root
from tablectl.mqtt.redelivery import ANONYMOUS, Asked, Dormant, Redelivery, Rewound
from tablectl.mqtt.session import InJournalThread, PublishedRow, RelayCounters, Session
from tablectl.mqtt.withheld import WithheldRows, placeholder_json
from tablectl.store.journal import HandedMark, JournalReader, JournalRow, Store, meter_reading
from tablectl.util.slices import Slices

log = structlog.get_logger(__name__)

# Rows handed on in one go, between two chances for a lock-out edge to run (util/slices.py):
# a commit's rows as they land, or a slice of a backlog.
OFFER_MAX_ROWS = 8


class AckBook:
    """Each registered backend's end-to-end acknowledgement: forward only, never past the
    journal. The outbox keeps a row until the slowest backend has it."""

    def __init__(self, backends: list[str], saved: dict[str, int]) -> None:
        self.backends = tuple(backends)
        self.acked = {b: saved.get(b, 0) for b in backends}
        self.unsaved: dict[str, int] = {}

    @property
    def through(self) -> int:
        """Every registered backend has every row through this seq."""
        return min(self.acked.values())

    def offer(self, backend_id: str, seq: int, last_seq: int) -> str | None:
        """Take an acknowledgement; None when taken (or stale), else why it is refused."""
        if backend_id not in self.acked:
            return f"backend {backend_id!r} is not registered (mqtt.backends: {self.backends})"
        if seq > last_seq:
            return f"acked_through_seq {seq} is past the journal (last seq {last_seq})"
        if seq > self.acked[backend_id]:
            self.acked[backend_id] = seq
            self.unsaved[backend_id] = seq
        return None


def delivery_fault(exc: PublishRefused | PublishUnacknowledged) -> str:
    """What a delivery fault says, the same each time the broker says it (journaled once)."""
    if isinstance(exc, PublishRefused):
        return f"the broker refused a publish: {exc.reason} (reason code 0x{exc.reason_code:02x})"
    return f"the broker did not acknowledge a publish within {exc.timeout_s:g} s"


def too_small(limit: int, what: str, size: int) -> BrokerUnsuitable:
    """A broker whose Maximum Packet Size is below what this table must be able to send:
    unsuitable, as one that takes QoS 0 only is (client.py). The text is the delivery fault
    (the same each time: journaled once)."""
    return BrokerUnsuitable(
        f"the broker accepts packets of at most {limit} bytes (its CONNACK's Maximum Packet "
        f"Size; Mosquitto: max_packet_size), less than {what} ({size} bytes) that this table "
        f"must be able to send: nothing is sent to it and the rows wait in the journal; raise "
        f"the broker's limit to at least {size} bytes"
    )


def short_error(exc: ValidationError) -> str:
    """A validation error in a line: where, what, and how many."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "payload"
    return f"{where}: {first['msg']} ({exc.error_count()} error(s))"


class Delivery:
    """The outbox, the acks and redelivery for one table, across its connections."""

    def __init__(
        self,
        config: MqttSection,
        *,
        site: str,
        table: str,
        store: Store,
        reader: JournalReader,
        in_journal_thread: InJournalThread,
        counters: RelayCounters,
        clock: Callable[[], float],
        fault: str | None,
        on_delivery: Callable[[str | None], None],
    ) -> None:
        """fault: the delivery fault the journal says stands; on_delivery: told a new one
        (its text) or that delivery works again (None), once per change."""
        self._config = config
        self._site, self._table = site, table
        self._root = topic_root(site, table)
        self._store = store
        self._reader = reader
        self._in_journal_thread = in_journal_thread
        self.counters = counters
        self._now = clock
        self.fault = fault
        self._on_delivery = on_delivery
        self._wake = asyncio.Event()
        self._idle: Session | None = None  # the session whose outbound task waits for rows
        self.cursor = 0  # last seq handed to the broker on this connection
        self.handed: HandedMark = store.handed_mark()
        self.acks = AckBook(config.backends, store.acks())
        self.redelivery = Redelivery(self.acks.acked, stall_s=config.ack_stall_s, now=clock())
        self.withheld = WithheldRows()
        self._acks_arrived = asyncio.Event()

    def close(self) -> None:
        self.handed.close()

    def wake(self) -> None:
        """New journal rows were committed."""
        self._wake.set()

    def delivery_is(self, fault: str | None) -> None:
        """A delivery fault (its text) or delivery working (None): told once per change."""
        if fault == self.fault:
            return
        self.fault = fault
        if fault is None:
            log.info("the broker takes this table's rows again: delivery fault cleared")
        self._on_delivery(fault)

    def start(self, client: MqttClient) -> Session:
        """A new connection: everything some backend has not acknowledged goes out again,
        with the same ids (but not for a backend gone dormant: it asks when it is back)."""
        self.cursor = self.redelivery.floor(self.handed.seq)
        self.redelivery.session(self.cursor, self._now())
        session = Session(client, self._config.publish_window)
        self._send_whole(session)
        return session

    def ending(self) -> None:
        """The session is ending: no row is offered to it."""
        self._idle = None

    # --- acks and replays asked for ---------------------------------------------------

    def take_ack(self, backend: str, seq: int, last_seq: int) -> str | None:
        """A backend's end-to-end acknowledgement; why it is refused, if it is."""
        refused = self.acks.offer(backend, seq, last_seq)
        if refused is None:
            self._acks_arrived.set()
            if self.redelivery.ack_moved(backend, self._now()):
                self.wake()  # its paced replay may send the next rows
        return refused

    def replay_asked(self, requester: str | None, from_seq: int) -> str | None:
        """A replay request, rate-limited per backend (redelivery.py); why it is refused."""
        if requester is not None and requester not in self.acks.acked:
            return f"backend {requester!r} is not registered (mqtt.backends: {self.acks.backends})"
        self.counters.replay_requests += 1
        asked = self.redelivery.request(requester or ANONYMOUS, from_seq, self._now())
        if asked is Asked.STARTED:
            self.counters.replays_started += 1
            self.wake()
        elif asked is Asked.HELD:
            self.counters.replays_held += 1
        else:
            self.counters.replays_running += 1
        return None

    async def save_acks(self) -> None:
        """Acks coalesce into one light write at a time, in the journal thread."""
        while True:
            await self._acks_arrived.wait()
            self._acks_arrived.clear()
            pending, self.acks.unsaved = self.acks.unsaved, {}
            if pending:
                await self._in_journal_thread(functools.partial(self._store.record_acks, pending))

    async def redeliver(self) -> None:
        """The stall rule, a replay's lost window and the held replay requests
        (redelivery.py), checked a few times per stall time."""
        period = min(0.5, self._config.ack_stall_s / 4)
        while True:
            await asyncio.sleep(period)
            now = self._now()
            changes = self.redelivery.tick(now)
            for change in changes:
                if isinstance(change, Dormant):
                    log.warning(
                        "backend's ack stayed put through every heal: sending it nothing more "
                        "until it acknowledges or asks (its rows stay in the journal)",
                        backend=change.backend,
                    )
                    continue
                if isinstance(change, Rewound):
                    self.counters.replay_rewinds += 1
                    log.info(
                        "backend's ack stopped short of a replay: sending again from it, "
                        "fewer rows at a time",
                        backend=change.backend,
                        after_seq=change.after,
                        window=change.window,
                    )
                    continue
                self.counters.heals += change.heal
                self.counters.replays_started += not change.heal
                log.info(
                    "backend's ack stalled: sending its rows again"
                    if change.heal
                    else "replay asked for: sending rows again",
                    backend=change.requester or "(not named)",
                    after_seq=change.after,
                    through_seq=change.until,
                )
            if changes:
                self.wake()

    # --- outbound: the journal, in order, the pipe kept full ---------------------------

    async def outbound(self, session: Session) -> None:
        """New rows first, then rows a backend lacks (a heal or a replay asked for). Idle,
        it lets `offer` hand new rows on as they land."""
        window = self._config.publish_window
        while True:
            self._wake.clear()
            sent = await self._send_new(session, window)
            sent += await self._send_again(session, window)
            if not sent:
                self._idle = session
                try:
                    await self._wake.wait()
                finally:
                    self._idle = None

    def offer(self, rows: Sequence[JournalRow]) -> None:
        """Rows just committed, in order, on the loop: handed to the broker now when the
        relay is idle with room for them (no read back from the journal, no task woken);
        otherwise the outbound task takes them from the journal in its turn."""
        session = self._idle
        if (
            session is None
            or not session.client.is_connected
            or session.failed is not None
            or len(rows) > OFFER_MAX_ROWS
            or rows[0].seq != self.cursor + 1
            or not session.has_room(len(rows))
        ):
            self.wake()
            return
        self._hand_new(session, rows)
        self.counters.offered += len(rows)

    async def _send_new(self, session: Session, window: int) -> int:
        rows = self._reader.outbox_after(self.cursor, limit=window)
        if not rows:
            return 0
        slices = Slices()  # a lock-out edge is not held behind a window of rows
        start = 0
        while start < len(rows):
            await session.slot()
            room = session.window - session.in_flight
            part = rows[start : start + min(OFFER_MAX_ROWS, room)]
            self._hand_new(session, part)
            start += len(part)
            await slices.check()
        return len(rows)

    def _hand_new(self, session: Session, rows: Sequence[PublishedRow]) -> None:
        """New rows to the broker, in order, written at once, then the latest reading of each
        meter they changed (retained, for signs: those may go past the window by the table's
        meters). The caller saw to the room for the rows."""
        # Written before the rows leave, so a crash cannot make a re-send look new.
        handed_before = self.handed.seq
        self.handed.advance(rows[-1].seq)
        for row in rows:
            self._hand(session, row, replay=row.seq <= handed_before)
        self.cursor = rows[-1].seq
        self.redelivery.handed_through(self.cursor)
        for meter in session.meters.values():
            self._send(
                session,
                f"{self._root}/meter/{meter.meter_id}",
                meter.model_dump_json().encode(),
                retain=True,
            )
        session.meters.clear()
        session.client.flush()

    async def _send_again(self, session: Session, window: int) -> int:
        """Rows handed before on this connection, again (the retained meters stay as the
        newest rows left them)."""
        batch = self.redelivery.next_batch(window)
        if batch is None:
            return 0
        after, count = batch
        rows = self._reader.outbox_after(after, limit=count)
        if not rows:
            return 0
        slices = Slices()
        for row in rows:
            await session.slot()
            self._hand(session, row, replay=True, meters=False)
            await slices.check()
        self.redelivery.sent(after, rows[-1].seq, self._now())
        self.counters.redelivered += len(rows)
        session.client.flush()
        return len(rows)

    def _hand(
        self, session: Session, row: PublishedRow, *, replay: bool, meters: bool = True
    ) -> None:
        payload = envelope_json(
            type_=row.type,
            event_id=row.event_id,
            site=self._site,
            table=self._table,
            boot_id=row.boot_id,
            seq=row.seq,
            ts=row.ts,
            replay=replay,
            data_json=row.data_json,
        )
        try:
            self._send(session, f"{self._root}/evt", payload, seq=row.seq)
        except PacketTooLarge as exc:
            self._withhold(session, row, exc, replay=replay)
        self.counters.published += 1
        self.counters.replayed += replay
        if not meters:
            return
        try:
            reading = meter_reading(row.type, row.data_json)
        except ValidationError as exc:  # the row went out; only the retained meter waits
            log.error(
                "journal row does not match its record type", seq=row.seq, error=short_error(exc)
            )
            reading = None
        if reading is not None:
            session.meters[reading.meter_id] = MeterValue(
                meter_id=reading.meter_id, amount_cents=reading.meter_cents, seq=row.seq, ts=row.ts
            )

    def _withhold(
        self, session: Session, row: PublishedRow, refused: PacketTooLarge, *, replay: bool
    ) -> None:
        """A row larger than the broker accepts: a placeholder under its seq instead, and a
        delivery fault naming it (withheld.py)."""
        withheld = self.withheld.add(row.seq, row.type, refused)
        self.counters.rows_withheld += 1
        log.error("journal row larger than the broker accepts: placeholder sent", seq=row.seq)
        placeholder = placeholder_json(
            withheld, row, site=self._site, table=self._table, replay=replay
        )
        try:
            self._send(session, f"{self._root}/evt", placeholder, seq=None)
        except PacketTooLarge as exc:
            # Not even the placeholder fits (the relay's check at connect should have seen
            # it): the broker is unsuitable; the session ends, the row stays in the journal.
            session.fail(too_small(exc.limit, f"the placeholder for row {row.seq}", exc.size))
            return
        self.delivery_is(self.withheld.fault())

    def _send_whole(self, session: Session) -> None:
        """Rows this run withheld that the broker now takes (its limit raised): whole, with
        their seq, whatever the backends acknowledged past their placeholders."""
        for seq in self.withheld.fitting(session.client.limits.max_packet_bytes):
            for row in self._reader.outbox_after(seq - 1, limit=1):
                self._hand(session, row, replay=True, meters=False)

    def _send(
        self,
        session: Session,
        topic: str,
        payload: bytes,
        *,
        retain: bool = False,
        seq: int | None = None,
    ) -> None:
        """Hand one message to the client now (it keeps call order); its PUBACK frees a slot.
        seq: the journal row it is, if it is one."""
        puback = session.client.publish_nowait(topic, payload, retain=retain)
        session.in_flight += 1
        puback.add_done_callback(functools.partial(self._acked, session, seq))

    def _acked(self, session: Session, seq: int | None, puback: asyncio.Future[None]) -> None:
        session.in_flight -= 1
        session.room.set()
        if puback.cancelled():
            return
        refused = puback.exception()  # a lost connection is the watcher's to report
        if refused is None:
            if seq is not None:
                self.withheld.delivered(seq)
                if self.fault is not None:
                    # A row got through: the broker delivers again (but a row withheld for
                    # its size stays a fault until it goes out whole).
                    self.delivery_is(self.withheld.fault())
        elif isinstance(refused, PublishRefused):
            # Not published: the row stays outstanding and goes again on the next connect.
            session.fail(refused)
