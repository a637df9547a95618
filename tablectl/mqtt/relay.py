"""MQTT relay: publishes the journal, in seq order, to the progressive-system backends.

The journal is the outbox. Rows are handed to the broker at QoS 1 in seq order, up to
`publish_window` of them awaiting their PUBACK at once, and stay outstanding until every
registered backend has acknowledged them end to end on `ack/{backend_id}`; on every connect
the relay sends again from the lowest acknowledgement. A row handed to a broker before goes
out with `replay: true`, across restarts too (`HandedMark`). Inbound messages are parsed by
the contract's models only (`contract.py`): anything else is counted, logged with its topic
and answered with an error where it carries a correlation id. See docs/mqtt.md.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, Self, TypeVar

import aiomqtt
import paho.mqtt.client as mqtt
import structlog
from pydantic import ValidationError

from tablectl.config import MqttSection
from tablectl.mqtt.contract import (
    COMMAND_MODELS,
    COMMANDS,
    MAX_INBOUND_BYTES,
    Ack,
    BacklogAlarm,
    Birth,
    Correlated,
    Health,
    MeterValue,
    ReplayCommand,
    Reply,
    ReplyData,
    ShufflerState,
    Status,
    TableSnapshot,
    envelope_json,
    topic_root,
)
from tablectl.store.journal import HandedMark, JournalReader, OutboxRow, Store
from tablectl.util.backoff import Backoff

log = structlog.get_logger(__name__)
T = TypeVar("T")

__all__ = ["Relay", "mqtt_call", "topic_root"]

# Nagle's algorithm holds a small publish back until the previous one is acknowledged by TCP;
# with delayed ACKs that is tens of milliseconds on an event's way to the backend.
# A refused command too large for this is not read for a correlation id: nobody is answered.
MAX_CORRELATED_BYTES = 1 << 20
SOCKET_OPTIONS = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)


class _LastError(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.message = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.message = record.getMessage()


class Client(aiomqtt.Client):
    """aiomqtt's client, with two additions behind this one seam (aiomqtt 2.x internals):

    - `publish_nowait` hands a QoS 1 message to paho at once and returns a future for its
      PUBACK. aiomqtt's own publish checks every pending call per publish and wraps each in
      wait_for: at a window of hundreds in flight that costs more than the publish itself.
    - a connect fails at once when the broker drops the connection before its CONNACK. With
      TLS 1.3 the broker refuses a client certificate only after the handshake (an alert on
      the first read); aiomqtt would wait out its timeout and say only that.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._pubacks: dict[int, asyncio.Future[None]] = {}
        self._in_session = False  # between a successful __aenter__ and __aexit__
        self._last_error = _LastError()
        paho_log = logging.Logger("tablectl.mqtt.paho")
        paho_log.parent = logging.getLogger("mqtt")  # aiomqtt's logger: paho's lines still go there
        paho_log.addHandler(self._last_error)
        super().__init__(*args, logger=paho_log, **kwargs)

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any = None
    ) -> None:
        if not self._connected.done():
            self._connected.set_exception(
                aiomqtt.MqttError(
                    "the broker closed the connection before accepting it: "
                    + (self._last_error.message or str(reason_code))
                )
            )
            self._connected.exception()  # a connect that already gave up has no one to tell
            return
        super()._on_disconnect(client, userdata, flags, reason_code, properties)
        if not self._in_session and self._disconnected.done():
            # A connect given up on, or a session already left: no one is there to tell.
            self._disconnected.exception()

    def publish_nowait(
        self, topic: str, payload: bytes, *, retain: bool = False
    ) -> asyncio.Future[None]:
        """A QoS 1 publish handed to paho now (paho sends in call order); the future is done
        when the broker's PUBACK arrives. Only while connected: paho would queue it otherwise."""
        info = self._client.publish(topic, payload, 1, retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            raise aiomqtt.MqttCodeError(info.rc, "Could not publish message")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pubacks[info.mid] = done
        return done

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self._in_session = True
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        # aiomqtt 2.5 returns early from a connection the broker broke without looking at
        # why: the loop would log "Future exception was never retrieved" for it. The
        # session's own error has said why.
        self._in_session = False
        if self._disconnected.done() and not self._disconnected.cancelled():
            self._disconnected.exception()
        await super().__aexit__(*exc_info)

    def _on_socket_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        # aiomqtt defers add_writer through call_soon_threadsafe, as paho may ask from the
        # thread that connects. On the loop's own thread it is added at once, so that paho's
        # unregister (in `flush`) can never come before it and leave a writer spinning.
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._loop.add_writer(sock.fileno(), self.flush)
        else:
            super()._on_socket_register_write(client, userdata, sock)

    def flush(self) -> None:
        """Write what paho holds to the socket now. Left to aiomqtt, a publish is written
        only after the loop has registered the socket for writing and polled it, a turn or
        two later and behind whatever else those turns run (docs/mqtt.md, Performance)."""
        try:
            self._client.loop_write()
        except Exception as exc:  # noqa: BLE001 (as aiomqtt's writer: the connection broke)
            if not self._disconnected.done():
                self._disconnected.set_exception(exc)

    def _on_publish(
        self, client: Any, userdata: Any, mid: int, reason_code: Any, properties: Any
    ) -> None:
        done = self._pubacks.pop(mid, None)
        if done is None:
            super()._on_publish(client, userdata, mid, reason_code, properties)
        elif not done.done():
            done.set_result(None)


def make_client(config: MqttSection, *, site: str, table: str, will: bytes) -> Client:
    """The table's client: TLS verifying the broker (and showing our certificate), our
    credentials, TCP_NODELAY, and the retained offline status as last-will."""
    c = config
    tls = None
    if c.tls:
        tls = aiomqtt.TLSParameters(
            ca_certs=str(c.ca_file) if c.ca_file else None,
            certfile=str(c.cert_file) if c.cert_file else None,
            keyfile=str(c.key_file) if c.key_file else None,
            cert_reqs=ssl.CERT_REQUIRED,  # the broker proves who it is
        )
    return Client(
        c.host,
        c.port,
        identifier=c.client_id or f"tablectl-{site}-{table}",
        username=c.username,
        password=c.password,
        keepalive=c.keepalive_s,
        tls_params=tls,
        will=aiomqtt.Will(f"{topic_root(site, table)}/status", will, qos=1, retain=True),
        socket_options=SOCKET_OPTIONS,
        # No limit in paho: the relay keeps the window itself (paho's own limit rescans every
        # message in flight on each PUBACK).
        max_inflight_messages=0,
    )


class InJournalThread(Protocol):
    """Runs a database write where every write happens: the daemon's journal thread."""

    def __call__(self, work: Callable[[], T], /) -> Awaitable[T]: ...


@dataclass
class RelayCounters:
    connects: int = 0
    published: int = 0
    replayed: int = 0
    acks: int = 0
    inbound: int = 0
    malformed_inbound: int = 0
    acks_refused: int = 0  # unknown backend, or past the journal
    commands: int = 0


async def mqtt_call(operation: Awaitable[T]) -> T:
    """Await an aiomqtt operation without losing a cancellation.

    aiomqtt waits with asyncio.wait_for, which on Python 3.11 can swallow a cancellation that
    lands as the operation completes (fixed in 3.12): the task runs on although it was told
    to stop, and a shutdown waits on it for ever. A cancellation requested during the call
    that did not come out of it is raised here.
    """
    task = asyncio.current_task()
    before = task.cancelling() if task is not None else 0
    result = await operation
    if task is not None and task.cancelling() > before:
        raise asyncio.CancelledError
    return result


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
        from_seq = command.from_seq if isinstance(command, ReplayCommand) else None
        return Inbound(command=name, from_seq=from_seq, reply=_ok(command.correlation_id))
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


def describe_connect_error(exc: aiomqtt.MqttError, config: MqttSection) -> str:
    """Say which of our settings the broker's refusal points at."""
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            f"the broker's certificate does not verify against mqtt.ca_file "
            f"({config.ca_file or 'the system CAs'}): {text}"
        )
    refused_cert = ("ALERT_UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_REQ")
    # With TLS 1.3 the broker refuses a client certificate after the handshake: its alert
    # may arrive, or the socket may just close first (an EOF before the CONNACK).
    closed_after_handshake = config.tls and "EOF OCCURRED IN VIOLATION OF PROTOCOL" in text.upper()
    if any(s in text.upper() for s in refused_cert) or closed_after_handshake:
        return (
            f"the broker refused this table's client certificate (mqtt.cert_file "
            f"{config.cert_file or 'not set'}): {text}"
        )
    if isinstance(exc, aiomqtt.MqttCodeError) and exc.rc in (4, 5, 134, 135):
        return (
            f"the broker refused the credentials of mqtt.username "
            f"{config.username or '(none)'}: {text}"
        )
    return text


@dataclass
class _Session:
    client: Client
    inflight: asyncio.Semaphore
    tasks: asyncio.TaskGroup
    meters: dict[str, MeterValue] = field(default_factory=dict)


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
    ) -> None:
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
        self._cursor = 0  # last seq handed to the broker on this connection
        self._rewind_to: int | None = None  # a replay request, applied between batches
        self._handed: HandedMark = store.handed_mark()
        self.acks = AckBook(config.backends, store.acks())
        self._acks_arrived = asyncio.Event()
        self.connected = False
        self.counters = RelayCounters()
        self._alarmed: set[str] = set()

    def close(self) -> None:
        self._handed.close()

    def wake(self) -> None:
        """New journal rows were committed."""
        self._wake.set()

    # --- what status and health say --------------------------------------------------

    def backlog_alarms(self) -> list[BacklogAlarm]:
        """Backends past the retention bound (rows or age of the oldest unacknowledged)."""
        last = self._reader.last_seq
        now = datetime.now(UTC)
        out = []
        for backend, acked in self.acks.acked.items():
            behind = last - acked
            if behind <= 0:
                continue
            oldest = self._reader.ts_of(acked + 1)
            age = now - datetime.fromisoformat(oldest) if oldest else timedelta(0)
            if behind >= self._config.backlog_alarm_rows or age >= timedelta(
                hours=self._config.backlog_alarm_hours
            ):
                out.append(
                    BacklogAlarm(backend_id=backend, behind_rows=behind, oldest_unacked_ts=oldest)
                )
        names = {a.backend_id for a in out}
        for alarm in out:
            if alarm.backend_id not in self._alarmed:
                log.error(
                    "backlog past the retention bound: the operator decides (see docs/mqtt.md)",
                    backend=alarm.backend_id,
                    behind_rows=alarm.behind_rows,
                    oldest_unacked_ts=alarm.oldest_unacked_ts,
                )
        for cleared in self._alarmed - names:
            log.warning("backlog back within the retention bound", backend=cleared)
        self._alarmed = names
        return out

    def stats(self) -> dict[str, Any]:
        return {
            "connected": self.connected,
            "broker": f"{self._config.host}:{self._config.port}",
            "published_through_seq": self._cursor,
            "handed_through_seq": self._handed.seq,
            "acked_through_seq": self.acks.through,
            "acked": dict(self.acks.acked),
            "backlog_alarms": [a.model_dump() for a in self.backlog_alarms()],
            **asdict(self.counters),
        }

    def health(self, *, alarms: list[BacklogAlarm] | None = None) -> Health:
        sh = self._shuffler()
        counters = {
            "shuffler": {k: v for k, v in sh.items() if isinstance(v, int) and k != "boot_id"},
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
            shuffler=ShufflerState(link=sh["link"], state=sh.get("state")),
            alarms=self.backlog_alarms() if alarms is None else alarms,
            counters=counters,
        )

    # --- the connection ---------------------------------------------------------------

    def _status(self, status: Literal["online", "offline"]) -> bytes:
        return Status(status=status, boot_id=self._boot_id).model_dump_json().encode()

    def client(self) -> Client:
        """A client for this table's broker, as configured (TLS, credentials, last-will)."""
        return make_client(
            self._config, site=self._site, table=self._table, will=self._status("offline")
        )

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._save_acks(), name="mqtt-ack-save")
            tasks.create_task(self._connect(), name="mqtt-connect")

    async def _connect(self) -> None:
        backoff = Backoff(initial_s=0.5, max_s=self._config.reconnect_max_s)
        task = asyncio.current_task()
        while True:
            session_started = False
            try:
                before = task.cancelling() if task else 0
                async with self.client() as client:
                    session_started = True
                    if task and task.cancelling() > before:
                        raise asyncio.CancelledError  # swallowed while connecting (mqtt_call)
                    backoff.reset()
                    self.connected = True
                    self.counters.connects += 1
                    log.info("mqtt connected", broker=f"{self._config.host}:{self._config.port}")
                    try:
                        await self._session(client)
                    except asyncio.CancelledError:
                        await self._say_offline(client)
                        raise
            except aiomqtt.MqttError as exc:
                if not session_started and task and task.cancelling() > before:
                    # Told to stop while a connect was failing: aiomqtt's wait_for swallowed
                    # the cancellation (Python 3.11) and raised the failure instead. (After a
                    # session, 3.11's TaskGroup can leave the count raised without a request.)
                    raise asyncio.CancelledError from None
                level = log.warning if backoff.first_failure else log.debug
                level(
                    "mqtt unavailable; journaling continues",
                    broker=f"{self._config.host}:{self._config.port}",
                    error=describe_connect_error(exc, self._config),
                )
            finally:
                self.connected = False
            await asyncio.sleep(backoff.next_delay())

    async def _say_offline(self, client: aiomqtt.Client) -> None:
        """On an orderly stop; the broker's last-will covers every other way of going."""
        try:
            async with asyncio.timeout(1):
                await mqtt_call(
                    client.publish(
                        f"{self._root}/status", self._status("offline"), qos=1, retain=True
                    )
                )
        except (TimeoutError, aiomqtt.MqttError) as exc:
            log.warning("could not say offline; the last-will will", error=str(exc))

    async def _session(self, client: Client) -> None:
        await mqtt_call(client.subscribe(f"{self._root}/ack/+", qos=1))
        await mqtt_call(client.subscribe(f"{self._root}/cmd/+", qos=1))
        await self._publish_birth(client)
        await mqtt_call(
            client.publish(f"{self._root}/status", self._status("online"), qos=1, retain=True)
        )
        # Everything some backend has not acknowledged goes out again, with the same ids.
        self._cursor = self.acks.through
        try:
            async with asyncio.TaskGroup() as tasks:
                session = _Session(client, asyncio.Semaphore(self._config.publish_window), tasks)
                tasks.create_task(self._inbound(session), name="mqtt-inbound")
                tasks.create_task(self._outbound(session), name="mqtt-outbound")
                tasks.create_task(self._health_loop(client), name="mqtt-health")
        except* aiomqtt.MqttError as group:
            raise group.exceptions[0] from None

    def birth(self) -> Birth:
        snapshot = self._snapshot()
        return Birth(
            **dict(snapshot),
            last_seq=self._reader.last_seq,
            acked=dict(self.acks.acked),
        )

    async def _publish_birth(self, client: aiomqtt.Client) -> None:
        birth = self.birth()
        await mqtt_call(
            client.publish(f"{self._root}/birth", birth.model_dump_json(), qos=1, retain=True)
        )
        for meter in birth.meters:
            await mqtt_call(
                client.publish(
                    f"{self._root}/meter/{meter.meter_id}",
                    meter.model_dump_json(),
                    qos=1,
                    retain=True,
                )
            )

    # --- outbound: the journal, in order, the pipe kept full ---------------------------

    async def _outbound(self, session: _Session) -> None:
        window = self._config.publish_window
        while True:
            self._wake.clear()
            if self._rewind_to is not None:
                self._cursor, self._rewind_to = min(self._cursor, self._rewind_to), None
            rows = self._reader.outbox_after(self._cursor, limit=window)
            if not rows:
                await self._wake.wait()
                continue
            # Written before the rows leave, so a crash cannot make a re-send look new.
            handed_before = self._handed.seq
            self._handed.advance(rows[-1].seq)
            for row in rows:
                await session.inflight.acquire()
                self._hand(session, row, replay=row.seq <= handed_before)
            self._cursor = rows[-1].seq
            # The latest reading of each meter these rows changed, retained for signs.
            for meter in session.meters.values():
                await session.inflight.acquire()
                self._send(
                    session,
                    f"{self._root}/meter/{meter.meter_id}",
                    meter.model_dump_json().encode(),
                    retain=True,
                )
            session.meters.clear()
            session.client.flush()

    def _hand(self, session: _Session, row: OutboxRow, *, replay: bool) -> None:
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
        self._send(session, f"{self._root}/evt", payload)
        self.counters.published += 1
        self.counters.replayed += replay
        if '"meter":{' in row.data_json:
            reading = json.loads(row.data_json).get("meter")
            if isinstance(reading, dict):
                session.meters[reading["meter_id"]] = MeterValue(
                    meter_id=reading["meter_id"],
                    amount_cents=reading["meter_cents"],
                    seq=row.seq,
                    ts=row.ts,
                )

    def _send(self, session: _Session, topic: str, payload: bytes, *, retain: bool = False) -> None:
        """Hand one message to paho now (it keeps call order); its PUBACK frees a slot."""
        puback = session.client.publish_nowait(topic, payload, retain=retain)
        puback.add_done_callback(lambda _: session.inflight.release())

    # --- health ---------------------------------------------------------------------

    async def _health_loop(self, client: aiomqtt.Client) -> None:
        """Published when the shuffler or an alarm changes; counters ride every interval."""
        loop = asyncio.get_running_loop()
        schedule = HealthSchedule(self._config.health_counters_interval_s)
        while True:
            alarms = self.backlog_alarms()
            health = self.health(alarms=alarms)
            if schedule.due((health.shuffler, tuple(a.backend_id for a in alarms)), loop.time()):
                await mqtt_call(
                    client.publish(
                        f"{self._root}/health", health.model_dump_json(), qos=1, retain=True
                    )
                )
            await asyncio.sleep(1)

    # --- inbound ----------------------------------------------------------------------

    async def _inbound(self, session: _Session) -> None:
        async for message in session.client.messages:
            topic = str(message.topic)
            payload = message.payload
            body = payload if isinstance(payload, bytes) else str(payload).encode()
            await self.receive(session.client, topic, body)

    async def receive(self, client: aiomqtt.Client | None, topic: str, payload: bytes) -> None:
        """One inbound message: never raises for what it carries."""
        self.counters.inbound += 1
        msg = parse_inbound(self._root, topic, payload)
        if msg.error is not None:
            self.counters.malformed_inbound += 1
            log.warning("malformed mqtt message refused", topic=topic, error=msg.error)
        elif msg.ack is not None:
            backend, seq = msg.ack
            refused = self.acks.offer(backend, seq, self._reader.last_seq)
            if refused:
                self.counters.acks_refused += 1
                log.warning("mqtt ack refused", topic=topic, error=refused)
            else:
                self.counters.acks += 1
                self._acks_arrived.set()
        else:
            self.counters.commands += 1
        if msg.command == "replay":
            assert msg.from_seq is not None
            self._rewind_to = msg.from_seq - 1
            self.wake()
        elif msg.command == "resync" and client is not None:
            await self._publish_birth(client)
        if msg.reply is not None and client is not None:
            reply = msg.reply
            if reply.status == "ok":
                data = ReplyData(last_seq=self._reader.last_seq, from_seq=msg.from_seq)
                reply = reply.model_copy(update={"data": data})
            name = topic.rsplit("/", 1)[-1]
            await mqtt_call(
                client.publish(f"{self._root}/res/{name}", reply.model_dump_json(), qos=1)
            )

    async def _save_acks(self) -> None:
        """Acks coalesce into one light write at a time, in the journal thread."""
        while True:
            await self._acks_arrived.wait()
            self._acks_arrived.clear()
            pending, self.acks.unsaved = self.acks.unsaved, {}
            if pending:
                await self._in_journal_thread(functools.partial(self._store.record_acks, pending))
