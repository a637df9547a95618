"""MQTT relay: publishes the journal, in seq order, to the progressive-system backends.

The journal is the outbox. Rows are handed to the broker at QoS 1 in seq order, up to
`publish_window` of them awaiting their PUBACK at once, and stay outstanding until every
registered backend has acknowledged them end to end on `ack/{backend_id}`; on every connect
the relay sends again from the lowest acknowledgement. Rows a backend lacks are sent again
within a connection too, paced by its acks: when its ack stalls, or when it asks
(`redelivery.py`). A row handed to a broker before goes out with `replay: true`, across
restarts too (`HandedMark`). Inbound messages are parsed by the contract's models only
(`contract.py`): anything else is counted, logged with its topic and answered with an error
where it carries a correlation id. The connection is the one reconnect component's
(util/reconnect.py) over the relay's own MQTT 5 client (client.py): a broker refusing our
credentials, certificate or a publish (its ACL) is a refusal, retried at the longest backoff
and logged once. A publish refused, or not acknowledged in time, is a delivery fault: the
daemon journals it (once per change) and status shows it. See docs/mqtt.md.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, TypeVar

import structlog
from pydantic import ValidationError

from tablectl.config import MqttSection
from tablectl.mqtt.client import (
    ClosedBeforeAccepted,
    ConnectRefused,
    MqttClient,
    MqttError,
    PacketTooLarge,
    PublishRefused,
    PublishUnacknowledged,
    Will,
    broker_reconnector,
    client_for,
)
from tablectl.mqtt.client import tls_context as client_tls_context
from tablectl.mqtt.contract import (
    COMMAND_MODELS,
    COMMANDS,
    MAX_INBOUND_BYTES,
    WILL_DELAY_S,
    Ack,
    BacklogAlarm,
    Birth,
    Correlated,
    Health,
    MeterValue,
    ProgressiveLinkState,
    ReplayCommand,
    Reply,
    ReplyData,
    ShufflerState,
    Status,
    TableSnapshot,
    envelope_json,
    topic_root,
)
from tablectl.mqtt.redelivery import ANONYMOUS, Asked, Dormant, Redelivery, Rewound
from tablectl.mqtt.withheld import WithheldRows, placeholder_json
from tablectl.status import BacklogAlarm as StatusBacklogAlarm
from tablectl.status import BrokerLink, BrokerStats, DeviceStatus
from tablectl.store.journal import HandedMark, JournalReader, JournalRow, Store, meter_reading
from tablectl.util.reconnect import Permanent, ReconnectState
from tablectl.util.slices import Slices

log = structlog.get_logger(__name__)
T = TypeVar("T")

__all__ = ["Relay", "make_client", "tls_context", "topic_root"]

# A refused command too large for this is not read for a correlation id: nobody is answered.
MAX_CORRELATED_BYTES = 1 << 20
# Rows handed on in one go, between two chances for a lock-out edge to run (util/slices.py):
# a commit's rows as they land, or a slice of a backlog.
OFFER_MAX_ROWS = 8


class PublishedRow(Protocol):
    """A journal row as the relay publishes it: straight from its commit (`JournalRow`) or
    read back from the journal (`OutboxRow`)."""

    @property
    def seq(self) -> int: ...
    @property
    def event_id(self) -> str: ...
    @property
    def ts(self) -> str: ...
    @property
    def boot_id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def data_json(self) -> str: ...


class BrokerRefused(MqttError, Permanent):
    """The broker said no to this table (credentials, certificate, ACL): waiting will not
    change its mind, so the relay retries at the longest backoff and logs it once."""


def delivery_fault(exc: PublishRefused | PublishUnacknowledged) -> str:
    """What a delivery fault says, the same each time the broker says it (journaled once)."""
    if isinstance(exc, PublishRefused):
        return f"the broker refused a publish: {exc.reason} (reason code 0x{exc.reason_code:02x})"
    return f"the broker did not acknowledge a publish within {exc.timeout_s:g} s"


def identity_warnings(config: MqttSection, table_id: str) -> list[str]:
    """What `config check` warns of: a username other than the table id is another table's
    identity on the broker (or none), and the broker's ACL refuses every publish under this
    table's topics (docs/mqtt.md, Security)."""
    if config.username is not None and config.username != table_id:
        return [
            f"mqtt.username {config.username!r} is not table.table_id {table_id!r}: the "
            "shipped broker ACL lets a table publish only under its own id, so every event "
            "would be refused (with use_identity_as_username, the certificate's common name "
            "is the username: issue it with CN = the table id)"
        ]
    return []


def tls_context(config: MqttSection) -> ssl.SSLContext:
    """Verify the broker (mqtt.ca_file, else the system CAs, and its host name) and show it
    this table's certificate."""
    return client_tls_context(config.ca_file, config.cert_file, config.key_file)


def make_client(config: MqttSection, *, site: str, table: str, will: bytes) -> MqttClient:
    """The table's client (`client_for`), with the retained offline status as last-will,
    sent once the connection has been gone WILL_DELAY_S."""
    return client_for(
        config,
        client_id=config.client_id or f"tablectl-{site}-{table}",
        will=Will(f"{topic_root(site, table)}/status", will, retain=True, delay_s=WILL_DELAY_S),
    )


class InJournalThread(Protocol):
    """Runs a database write where every write happens: the daemon's journal thread."""

    def __call__(self, work: Callable[[], T], /) -> Awaitable[T]: ...


@dataclass
class RelayCounters:
    connects: int = 0
    published: int = 0
    offered: int = 0  # of those, handed on straight from their commit (Relay.offer)
    replayed: int = 0
    acks: int = 0
    inbound: int = 0
    malformed_inbound: int = 0
    acks_refused: int = 0  # unknown backend, or past the journal
    commands: int = 0
    publishes_refused: int = 0  # a PUBACK that said no (the ACL): the session ends
    publishes_unacknowledged: int = 0  # no PUBACK within the bound: the session ends
    rows_withheld: int = 0  # placeholders sent for rows larger than the broker accepts
    redelivered: int = 0  # rows sent again on one connection: heals and replays asked for
    heals: int = 0  # replays started because a backend's ack stalled
    replay_rewinds: int = 0  # replays gone back to the ack: a window lost, its window halved
    replay_requests: int = 0  # cmd/replay requests taken (each answered)
    replays_started: int = 0  # replays begun for them (at once, or once the limit allowed)
    replays_held: int = 0  # requests held by the rate limit (folded into one, started later)
    replays_running: int = 0  # requests a replay under way already covered


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


class HealthSchedule:
    """When `health` goes out: on a change of state, else once per counters interval (counters
    change all the time; publishing on their every change would flood the retained topic)."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._state: object = None
        self._sent_at: float | None = None

    def due(self, state: object, now: float) -> bool:
        if self._sent_at is None or state != self._state or now - self._sent_at >= self._interval_s:
            self._state, self._sent_at = state, now
            return True
        return False


@dataclass(frozen=True)
class Inbound:
    """What one inbound message asks of the relay (the parsing is pure: see `parse_inbound`)."""

    ack: tuple[str, int] | None = None
    command: str | None = None
    from_seq: int | None = None
    requester: str | None = None  # the backend a replay request names
    reply: Reply | None = None  # an error reply, where a correlation id could be read
    error: str | None = None  # why the message was refused


def _short(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "payload"
    return f"{where}: {first['msg']} ({exc.error_count()} error(s))"


def parse_inbound(root: str, topic: str, payload: bytes) -> Inbound:
    """Classify one inbound message; never raises, whatever the payload."""
    sub = topic.removeprefix(root + "/")
    kind, _, name = sub.partition("/")
    if len(payload) > MAX_INBOUND_BYTES:
        error = f"payload of {len(payload)} bytes (at most {MAX_INBOUND_BYTES})"
        return Inbound(error=error, reply=_error_reply(kind, payload, error))
    if kind == "ack" and name and "/" not in name:
        try:
            ack = Ack.model_validate_json(payload)
        except ValidationError as exc:
            return Inbound(error=_short(exc))
        return Inbound(ack=(name, ack.acked_through_seq))
    if kind == "cmd" and name in COMMANDS:
        try:
            command = COMMAND_MODELS[name].model_validate_json(payload)
        except ValidationError as exc:
            error = _short(exc)
            return Inbound(error=error, reply=_error_reply(kind, payload, error))
        if isinstance(command, ReplayCommand):
            return Inbound(
                command=name,
                from_seq=command.from_seq,
                requester=command.backend_id,
                reply=_ok(command.correlation_id),
            )
        return Inbound(command=name, reply=_ok(command.correlation_id))
    error = f"unknown command {name!r}; known: {', '.join(COMMANDS)}"
    if kind != "cmd":
        error = f"not a topic the table reads: {sub!r}"
    return Inbound(error=error, reply=_error_reply(kind, payload, error))


def _ok(correlation_id: str) -> Reply:
    return Reply(correlation_id=correlation_id, status="ok", data=None, error=None)


def _error_reply(kind: str, payload: bytes, error: str) -> Reply | None:
    if kind != "cmd" or len(payload) > MAX_CORRELATED_BYTES:
        return None
    try:
        correlated = Correlated.model_validate_json(payload)
    except ValidationError:
        return None  # nobody to answer
    return Reply(correlation_id=correlated.correlation_id, status="error", data=None, error=error)


def describe_connect_error(exc: MqttError, config: MqttSection) -> str:
    """Say which of our settings the broker's refusal points at."""
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            f"the broker's certificate does not verify against mqtt.ca_file "
            f"({config.ca_file or 'the system CAs'}): {text}"
        )
    if _refused_our_certificate(exc, config):
        return (
            f"the broker refused this table's client certificate (mqtt.cert_file "
            f"{config.cert_file or 'not set'}): {text}"
        )
    if isinstance(exc, ConnectRefused) and exc.reason_code in (0x86, 0x87, 0x8C):
        certificate = (
            f" (a broker that takes the certificate's common name as the username, as the "
            f"shipped config does, judges mqtt.cert_file {config.cert_file})"
            if config.cert_file
            else ""
        )
        return (
            f"the broker refused the credentials of mqtt.username "
            f"{config.username or '(none)'}{certificate}: {text}"
        )
    return text


def _refused_our_certificate(exc: MqttError, config: MqttSection) -> bool:
    # With TLS 1.3 the broker refuses a client certificate after the handshake: its alert
    # may arrive, or the socket may just close first (before the CONNACK). Without a
    # certificate of ours, a close before the CONNACK is the broker's (full, restarting).
    upper = str(exc).upper()
    alerts = ("ALERT_UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_REQ")
    closed_on_us = isinstance(exc, ClosedBeforeAccepted) and exc.tls
    return any(a in upper for a in alerts) or (closed_on_us and config.cert_file is not None)


def _is_refusal(exc: MqttError, config: MqttSection) -> bool:
    """A refusal waiting will not cure (unlike a broker that is down or restarting)."""
    if isinstance(exc, ConnectRefused):
        return exc.permanent
    return "CERTIFICATE_VERIFY_FAILED" in str(exc) or _refused_our_certificate(exc, config)


@dataclass
class _Session:
    client: MqttClient
    window: int  # publishes that may await their PUBACK at once (mqtt.publish_window)
    in_flight: int = 0
    room: asyncio.Event = field(default_factory=asyncio.Event)  # a PUBACK freed a slot
    meters: dict[str, MeterValue] = field(default_factory=dict)
    # A PUBACK that said no: the session ends (one not come in time ends the client's).
    failed: PublishRefused | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def fail(self, exc: PublishRefused) -> None:
        if self.failed is None:
            self.failed = exc
            self.ended.set()

    def has_room(self, count: int) -> bool:
        return self.in_flight + count <= self.window

    async def slot(self) -> None:
        """Until one more publish may await its PUBACK."""
        while not self.has_room(1):
            self.room.clear()
            await self.room.wait()


class Relay:
    def __init__(
        self,
        config: MqttSection,
        *,
        site: str,
        table: str,
        boot_id: str,
        store: Store,
        reader: JournalReader,
        in_journal_thread: InJournalThread,
        snapshot: Callable[[], TableSnapshot],
        shuffler: Callable[[], dict[str, Any]],
        delivery_fault: str | None = None,
        on_delivery: Callable[[str | None], None] = lambda fault: None,
        progressive_link: Callable[[], ProgressiveLinkState | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        on_ack_past_end: Callable[[str, int, int], None] = lambda backend, seq, last: None,
    ) -> None:
        """delivery_fault: the one the journal says stands; on_delivery: told a new delivery
        fault (its text) or that delivery works again (None), once per change;
        on_ack_past_end: told a registered backend's acknowledgement past the journal's end
        (backend, its seq, the journal's last seq): a rollback's evidence."""
        self._on_ack_past_end = on_ack_past_end
        self._config = config
        self._site, self._table = site, table
        self._boot_id = boot_id
        self._store = store
        self._reader = reader
        self._in_journal_thread = in_journal_thread
        self._snapshot = snapshot
        self._shuffler = shuffler
        self._root = topic_root(site, table)
        self._wake = asyncio.Event()
        self._idle: _Session | None = None  # the session whose outbound task waits for rows
        # The latest game pace (retained on `pace`): published on each connect and change.
        self._pace: bytes | None = None
        self._pace_changed = asyncio.Event()
        self._cursor = 0  # last seq handed to the broker on this connection
        self._handed: HandedMark = store.handed_mark()
        self.acks = AckBook(config.backends, store.acks())
        self._now = clock
        self.redelivery = Redelivery(self.acks.acked, stall_s=config.ack_stall_s, now=clock())
        self.withheld = WithheldRows()
        self._delivery_fault = delivery_fault
        self._on_delivery = on_delivery
        self._progressive_link = progressive_link  # a linked table's LINK DOWN, in health
        self._acks_arrived = asyncio.Event()
        self.counters = RelayCounters()
        self._alarmed: set[str] = set()
        for warning in identity_warnings(config, table):
            log.warning(warning)
        self.reconnector = broker_reconnector(
            f"mqtt broker {config.host}:{config.port}",
            self._open,
            self._serve,
            self._close,
            refused_wait_s=config.reconnect_max_s,
        )

    def close(self) -> None:
        self._handed.close()

    @property
    def connected(self) -> bool:
        return self.reconnector.state is ReconnectState.CONNECTED

    def wake(self) -> None:
        """New journal rows were committed."""
        self._wake.set()

    # --- what status and health say --------------------------------------------------

    def backlog_alarms(self) -> list[BacklogAlarm]:
        """Backends past the retention bound (rows or age of the oldest unacknowledged), and
        every backend behind while the broker refuses or does not acknowledge our rows."""
        last = self._reader.last_seq
        now = datetime.now(UTC)
        out = []
        for backend, acked in self.acks.acked.items():
            behind = last - acked
            if behind <= 0:
                continue
            oldest = self._reader.ts_of(acked + 1)
            age = now - datetime.fromisoformat(oldest) if oldest else timedelta(0)
            if (
                self._delivery_fault is not None
                or behind >= self._config.backlog_alarm_rows
                or age >= timedelta(hours=self._config.backlog_alarm_hours)
            ):
                out.append(
                    BacklogAlarm(backend_id=backend, behind_rows=behind, oldest_unacked_ts=oldest)
                )
        names = {a.backend_id for a in out}
        for alarm in out:
            if alarm.backend_id not in self._alarmed:
                log.error(
                    "backlog alarm: the broker does not deliver this table's rows"
                    if self._delivery_fault is not None
                    else "backlog past the retention bound: the operator decides (see "
                    "docs/mqtt.md)",
                    backend=alarm.backend_id,
                    behind_rows=alarm.behind_rows,
                    oldest_unacked_ts=alarm.oldest_unacked_ts,
                    delivery_fault=self._delivery_fault,
                )
        for cleared in self._alarmed - names:
            log.warning("backlog back within the retention bound", backend=cleared)
        self._alarmed = names
        return out

    def link(self) -> BrokerLink:
        return BrokerLink(
            connected=self.connected, broker=f"{self._config.host}:{self._config.port}"
        )

    def stats(self) -> BrokerStats:
        return BrokerStats(
            connected=self.connected,
            broker=f"{self._config.host}:{self._config.port}",
            published_through_seq=self._cursor,
            handed_through_seq=self._handed.seq,
            acked_through_seq=self.acks.through,
            acked=dict(self.acks.acked),
            backlog_alarms=[
                StatusBacklogAlarm.model_validate(a.model_dump()) for a in self.backlog_alarms()
            ],
            delivery_fault=self._delivery_fault,
            redelivery=self.redelivery.view(),
            last_error=self.reconnector.last_error,
            counters=asdict(self.counters),
        )

    def health(self, *, alarms: list[BacklogAlarm] | None = None) -> Health:
        sh = DeviceStatus.of(self._shuffler())
        counters = {
            "shuffler": {
                "event_cursor": sh.event_cursor,
                "reconnects": sh.reconnects,
                **sh.counters,
            },
            "mqtt": asdict(self.counters),
            "journal": {
                "last_seq": self._reader.last_seq,
                "commits": self._store.commits,
                "steps_committed": self._store.steps_committed,
            },
            "behind_rows": {b: self._reader.last_seq - q for b, q in self.acks.acked.items()},
        }
        return Health(
            boot_id=self._boot_id,
            ts=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            shuffler=ShufflerState(link=sh.link, state=sh.state),
            alarms=self.backlog_alarms() if alarms is None else alarms,
            counters=counters,
            progressive_link=self._progressive_link(),
        )

    # --- the connection ---------------------------------------------------------------

    def _status(self, status: Literal["online", "offline"]) -> bytes:
        return Status(status=status, boot_id=self._boot_id).model_dump_json().encode()

    def client(self) -> MqttClient:
        """A client for this table's broker, as configured (TLS, credentials, last-will)."""
        return make_client(
            self._config, site=self._site, table=self._table, will=self._status("offline")
        )

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._save_acks(), name="mqtt-ack-save")
            tasks.create_task(self.reconnector.run(), name="mqtt-connect")

    async def _open(self) -> MqttClient:
        """A connected client; a failure says which of our settings it points at."""
        client = self.client()
        try:
            await client.connect()
        except MqttError as exc:
            why = describe_connect_error(exc, self._config)
            raise (
                BrokerRefused(why) if _is_refusal(exc, self._config) else MqttError(why)
            ) from exc
        return client

    async def _close(self, client: MqttClient) -> None:
        """Without a DISCONNECT unless we said offline: the broker's last-will says it."""
        client.close()

    async def _serve(self, client: MqttClient) -> None:
        self.counters.connects += 1
        try:
            await self._session(client)
        except (PublishRefused, PublishUnacknowledged) as exc:
            if isinstance(exc, PublishRefused):
                self.counters.publishes_refused += 1
            else:
                self.counters.publishes_unacknowledged += 1
            self._delivery_is(delivery_fault(exc))
            raise
        except asyncio.CancelledError:
            await self._say_offline(client)
            raise

    def _delivery_is(self, fault: str | None) -> None:
        """A delivery fault (its text) or delivery working (None): told once per change."""
        if fault == self._delivery_fault:
            return
        self._delivery_fault = fault
        if fault is None:
            log.info("the broker takes this table's rows again: delivery fault cleared")
        self._on_delivery(fault)

    async def _publish(
        self, client: MqttClient, topic: str, payload: bytes, *, retain: bool = False
    ) -> None:
        """Publish and await the PUBACK (within the client's deadline). A message larger
        than the broker accepts is left out (it is made again on the next change)."""
        try:
            await client.publish(topic, payload, retain=retain)
        except PacketTooLarge as exc:
            log.error("message larger than the broker accepts: not sent", error=str(exc))

    async def _say_offline(self, client: MqttClient) -> None:
        """On an orderly stop; the broker's last-will covers every other way of going."""
        try:
            async with asyncio.timeout(1):
                await client.publish(f"{self._root}/status", self._status("offline"), retain=True)
                await client.disconnect()
        except (TimeoutError, MqttError) as exc:
            log.warning("could not say offline; the last-will will", error=str(exc))

    async def _session(self, client: MqttClient) -> None:
        await client.subscribe(f"{self._root}/ack/+")
        await client.subscribe(f"{self._root}/cmd/+")
        await self._publish_birth(client)
        await self._publish(client, f"{self._root}/status", self._status("online"), retain=True)
        # Everything some backend has not acknowledged goes out again, with the same ids
        # (but not for a backend gone dormant: it asks when it is back).
        self._cursor = self.redelivery.floor(self._handed.seq)
        self.redelivery.session(self._cursor, self._now())
        session = _Session(client, self._config.publish_window)
        self._send_whole(session)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._inbound(session), name="mqtt-inbound")
                tasks.create_task(self._outbound(session), name="mqtt-outbound")
                tasks.create_task(self._health_loop(client), name="mqtt-health")
                tasks.create_task(self._pace_loop(client), name="mqtt-pace")
                tasks.create_task(self._redeliver(session), name="mqtt-redeliver")
                tasks.create_task(self._watch(session), name="mqtt-watch")
        except* MqttError as group:
            raise group.exceptions[0] from None

    async def _watch(self, session: _Session) -> None:
        """The session ends when the connection does, or when the broker refuses a row or
        does not acknowledge one in time."""
        closed = asyncio.create_task(session.client.wait_closed())
        failed = asyncio.create_task(session.ended.wait())
        try:
            await asyncio.wait((closed, failed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            failed.cancel()
        self._idle = None  # no row is offered to a session that is ending
        if session.failed is not None:
            if closed.done() and not closed.cancelled():
                closed.exception()  # read: the refusal is the news
            raise session.failed
        await closed  # raises why the connection was lost
        raise MqttError("the connection ended")

    async def _redeliver(self, session: _Session) -> None:
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

    def birth(self) -> Birth:
        snapshot = self._snapshot()
        return Birth(
            **dict(snapshot),
            last_seq=self._reader.last_seq,
            acked=dict(self.acks.acked),
        )

    async def _publish_birth(self, client: MqttClient) -> None:
        birth = self.birth()
        await self._publish(
            client, f"{self._root}/birth", birth.model_dump_json().encode(), retain=True
        )
        for meter in birth.meters:
            await self._publish(
                client,
                f"{self._root}/meter/{meter.meter_id}",
                meter.model_dump_json().encode(),
                retain=True,
            )

    # --- outbound: the journal, in order, the pipe kept full ---------------------------

    async def _outbound(self, session: _Session) -> None:
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
            or rows[0].seq != self._cursor + 1
            or not session.has_room(len(rows))
        ):
            self.wake()
            return
        self._hand_new(session, rows)
        self.counters.offered += len(rows)

    async def _send_new(self, session: _Session, window: int) -> int:
        rows = self._reader.outbox_after(self._cursor, limit=window)
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

    def _hand_new(self, session: _Session, rows: Sequence[PublishedRow]) -> None:
        """New rows to the broker, in order, written at once, then the latest reading of each
        meter they changed (retained, for signs: those may go past the window by the table's
        meters). The caller saw to the room for the rows."""
        # Written before the rows leave, so a crash cannot make a re-send look new.
        handed_before = self._handed.seq
        self._handed.advance(rows[-1].seq)
        for row in rows:
            self._hand(session, row, replay=row.seq <= handed_before)
        self._cursor = rows[-1].seq
        self.redelivery.handed_through(self._cursor)
        for meter in session.meters.values():
            self._send(
                session,
                f"{self._root}/meter/{meter.meter_id}",
                meter.model_dump_json().encode(),
                retain=True,
            )
        session.meters.clear()
        session.client.flush()

    async def _send_again(self, session: _Session, window: int) -> int:
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
        self, session: _Session, row: PublishedRow, *, replay: bool, meters: bool = True
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
            log.error("journal row does not match its record type", seq=row.seq, error=_short(exc))
            reading = None
        if reading is not None:
            session.meters[reading.meter_id] = MeterValue(
                meter_id=reading.meter_id, amount_cents=reading.meter_cents, seq=row.seq, ts=row.ts
            )

    def _withhold(
        self, session: _Session, row: PublishedRow, refused: PacketTooLarge, *, replay: bool
    ) -> None:
        """A row larger than the broker accepts: a placeholder under its seq instead, and a
        delivery fault naming it (withheld.py)."""
        withheld = self.withheld.add(row.seq, row.type, refused)
        self.counters.rows_withheld += 1
        log.error("journal row larger than the broker accepts: placeholder sent", seq=row.seq)
        placeholder = placeholder_json(
            withheld, row, site=self._site, table=self._table, replay=replay
        )
        self._send(session, f"{self._root}/evt", placeholder, seq=None)
        self._delivery_is(self.withheld.fault())

    def _send_whole(self, session: _Session) -> None:
        """Rows this run withheld that the broker now takes (its limit raised): whole, with
        their seq, whatever the backends acknowledged past their placeholders."""
        for seq in self.withheld.fitting(session.client.limits.max_packet_bytes):
            for row in self._reader.outbox_after(seq - 1, limit=1):
                self._hand(session, row, replay=True, meters=False)

    def _send(
        self,
        session: _Session,
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

    def _acked(self, session: _Session, seq: int | None, puback: asyncio.Future[None]) -> None:
        session.in_flight -= 1
        session.room.set()
        if puback.cancelled():
            return
        refused = puback.exception()  # a lost connection is the watcher's to report
        if refused is None:
            if seq is not None:
                self.withheld.delivered(seq)
                if self._delivery_fault is not None:
                    # A row got through: the broker delivers again (but a row withheld for
                    # its size stays a fault until it goes out whole).
                    self._delivery_is(self.withheld.fault())
        elif isinstance(refused, PublishRefused):
            # Not published: the row stays outstanding and goes again on the next connect.
            session.fail(refused)

    # --- health ---------------------------------------------------------------------

    async def _health_loop(self, client: MqttClient) -> None:
        """Published when the shuffler or an alarm changes; counters ride every interval."""
        loop = asyncio.get_running_loop()
        schedule = HealthSchedule(self._config.health_counters_interval_s)
        while True:
            alarms = self.backlog_alarms()
            health = self.health(alarms=alarms)
            changes = (
                health.shuffler,
                tuple(a.backend_id for a in alarms),
                health.progressive_link,
            )
            if schedule.due(changes, loop.time()):
                await self._publish(
                    client, f"{self._root}/health", health.model_dump_json().encode(), retain=True
                )
            await asyncio.sleep(1)

    def publish_pace(self, payload: bytes) -> None:
        """The table's game pace (service/pace.py, at most once a minute): retained on `pace`,
        now if connected, else on the next connect."""
        self._pace = payload
        self._pace_changed.set()

    async def _pace_loop(self, client: MqttClient) -> None:
        while True:
            self._pace_changed.clear()
            if self._pace is not None:
                await self._publish(client, f"{self._root}/pace", self._pace, retain=True)
            await self._pace_changed.wait()

    # --- inbound ----------------------------------------------------------------------

    async def _inbound(self, session: _Session) -> None:
        async for message in session.client.messages():
            await self.receive(session.client, message.topic, message.payload)

    async def receive(self, client: MqttClient | None, topic: str, payload: bytes) -> None:
        """One inbound message: never raises for what it carries."""
        self.counters.inbound += 1
        msg = parse_inbound(self._root, topic, payload)
        if msg.error is not None:
            self.counters.malformed_inbound += 1
            log.warning("malformed mqtt message refused", topic=topic, error=msg.error)
        elif msg.ack is not None:
            backend, seq = msg.ack
            last_seq = self._reader.last_seq
            refused = self.acks.offer(backend, seq, last_seq)
            if refused:
                self.counters.acks_refused += 1
                log.warning("mqtt ack refused", topic=topic, error=refused)
                if backend in self.acks.acked and seq > last_seq:
                    # A registered backend holds rows this journal does not: it was rolled
                    # back (docs/design.md). The daemon stops publishing and says so.
                    self._on_ack_past_end(backend, seq, last_seq)
            else:
                self.counters.acks += 1
                self._acks_arrived.set()
                if self.redelivery.ack_moved(backend, self._now()):
                    self.wake()  # its paced replay may send the next rows
        else:
            self.counters.commands += 1
        reply = msg.reply
        if msg.command == "replay":
            assert msg.from_seq is not None
            refused = self._replay_asked(msg.requester, msg.from_seq)
            if refused is not None and reply is not None:
                reply = reply.model_copy(update={"status": "error", "error": refused})
        elif msg.command == "resync" and client is not None:
            await self._publish_birth(client)
        if reply is not None and client is not None:
            if reply.status == "ok":
                data = ReplyData(last_seq=self._reader.last_seq, from_seq=msg.from_seq)
                reply = reply.model_copy(update={"data": data})
            name = topic.rsplit("/", 1)[-1]
            await self._publish(
                client, f"{self._root}/res/{name}", reply.model_dump_json().encode()
            )

    def _replay_asked(self, requester: str | None, from_seq: int) -> str | None:
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

    async def _save_acks(self) -> None:
        """Acks coalesce into one light write at a time, in the journal thread."""
        while True:
            await self._acks_arrived.wait()
            self._acks_arrived.clear()
            pending, self.acks.unsaved = self.acks.unsaved, {}
            if pending:
                await self._in_journal_thread(functools.partial(self._store.record_acks, pending))
