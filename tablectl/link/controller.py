"""The link controller: stateless, any number at once, acknowledging only after COMMIT.

It reads every linked table's event stream (the table contract's `evt`, docs/mqtt.md), hands
each table's rows in seq order to the ledger in batches (one transaction each), and after the
COMMIT acknowledges each table on `ack/{backend_id}` (retained), as any backend does. Its
memory is a cache of the ledger: when the ledger or the broker comes back, it reloads every
table's cursor and asks each table for a replay from there (`cmd/replay`). Two controllers
apply the same rows; the ledger's locks and cursors let only the first count.

Around that: each link's state broadcast (at least every `broadcast_interval_ms`, and at once
after a hit or a validation), its parameters, the tables' claim answers, and the web sign.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
import structlog
from pydantic import ValidationError

from tablectl.link import broadcast, ledger
from tablectl.link.book import TableRow
from tablectl.link.config import LinkConfig
from tablectl.link.contract import (
    INBOUND_EVENT_MODELS,
    LINK_PREFIX,
    MAX_EVT_BYTES,
    EnvelopeHeader,
    LinkState,
    parse_table_topic,
    split_table,
    table_topic,
)
from tablectl.link.ledger import Connection, LedgerError, LinkRow
from tablectl.mqtt.client import MqttClient, MqttError, broker_reconnector, client_for
from tablectl.mqtt.contract import Status
from tablectl.util import sdnotify
from tablectl.util.backoff import Backoff

log = structlog.get_logger(__name__)
REPLAY_EVERY_S = 1.0  # a table is asked for missing rows at most this often ...
REPLAY_MAX_PAUSE_S = 30.0  # ... and then less and less often while none comes
COUNTERS_EVERY_S = 60
REFUSED_WAIT_S = 5.0  # a broker that refuses the controller is asked again this often
YIELD_EVERY = 64  # inbound messages handled before the writer gets a turn


@dataclass
class TableStream:
    """One table's rows on their way to the ledger: a cache, rebuilt from the ledger at will.

    It asks the table for a replay only when it knows rows are missing (it has seen a later
    one), and then with a growing pause while none of them comes: a replay resends every row
    from where it starts, so asking too often would bury the controller in copies.
    """

    ref: str
    committed: int  # the ledger's cursor as last seen (what may be acknowledged)
    queued: int  # the last seq handed to the writer (contiguous after committed)
    waiting: dict[int, TableRow] = field(default_factory=dict)  # rows past a missing one
    highest_seen: int = 0
    next_replay_at: float = -math.inf
    replay_pause_s: float = REPLAY_EVERY_S
    acked: int = -1  # the last ack published
    reacked_at: float = -math.inf

    @property
    def missing(self) -> bool:
        """Rows exist past what was handed to the writer, and they have not all come."""
        return self.highest_seen > self.queued

    def offer(self, row: TableRow, limit: int, now: float) -> list[TableRow]:
        """The rows ready for the writer now that this one arrived (in seq order)."""
        self.highest_seen = max(self.highest_seen, row.seq)
        if row.seq <= self.queued:
            return []  # a copy: the first is queued or applied
        if self.queued - self.committed >= limit:
            return []  # too far ahead of the ledger: asked for again once it catches up
        if row.seq != self.queued + 1:
            if len(self.waiting) < limit:
                self.waiting[row.seq] = row
            return []
        ready = [row]
        self.queued = row.seq
        while (following := self.waiting.pop(self.queued + 1, None)) is not None:
            ready.append(following)
            self.queued = following.seq
        # Rows are coming: a replay asked for may still be on its way.
        self.replay_pause_s = REPLAY_EVERY_S
        self.next_replay_at = now + REPLAY_EVERY_S
        return ready

    def replay_due(self, now: float, limit: int) -> bool:
        return self.missing and now >= self.next_replay_at and self.queued - self.committed < limit

    def replay_asked(self, now: float) -> None:
        self.next_replay_at = now + self.replay_pause_s
        self.replay_pause_s = min(REPLAY_MAX_PAUSE_S, self.replay_pause_s * 2)

    def committed_through(self, seq: int) -> None:
        self.committed = seq
        if seq > self.queued:
            self.queued = seq
            self.waiting = {s: r for s, r in self.waiting.items() if s > seq}


@dataclass
class Counters:
    rows_received: int = 0
    rows_copies: int = 0
    rows_applied: int = 0
    rows_not_linked: int = 0
    malformed: int = 0
    batches: int = 0
    batch_failures: int = 0
    replays_asked: int = 0
    acks_published: int = 0
    broadcasts: int = 0
    resyncs: int = 0


class Controller:
    def __init__(self, config: LinkConfig, *, controller_id: str | None = None) -> None:
        self.config = config
        self.id = controller_id or config.controller.resolved_id()
        self.link_ids = [lk.link_id for lk in config.link]
        # Subscribed per site: the broker's ACL grants a controller its sites (tablectl.acl).
        self.sites = sorted({split_table(t)[0] for lk in config.link for t in lk.tables})
        self.links: dict[str, LinkRow] = {}
        self.streams: dict[str, TableStream] = {}
        self.link_of: dict[str, str] = {}
        self.counters = Counters()
        self.client: MqttClient | None = None
        self.ready = asyncio.Event()
        self.ledger_error: str | None = "not connected yet"
        self.last_states: dict[str, LinkState] = {}
        # Every state broadcast heard (any controller's), and whether it was live: a retained
        # copy handed over at subscription shows amounts but says nothing about liveness.
        self.state_listeners: list[Callable[[LinkState, bool], None]] = []
        self._rows: deque[TableRow] = deque()
        self._rows_ready = asyncio.Event()  # rows to write, or a resync to do
        self._resync = asyncio.Event()
        self._published_parameters: dict[str, int] = {}
        self._mqtt_up = asyncio.Event()

    # --- the whole service -----------------------------------------------------------------

    async def run(self, extra: list[Callable[[], Coroutine[Any, Any, None]]] | None = None) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._mqtt_loop(), name="link-mqtt")
            tasks.create_task(self._writer_loop(), name="link-writer")
            tasks.create_task(self._broadcast_loop(), name="link-broadcast")
            tasks.create_task(self._housekeeping(), name="link-housekeeping")
            for job in extra or []:
                tasks.create_task(job(), name="link-extra")

    async def _connect_ledger(self, role: str) -> Connection:
        db = self.config.database
        conn = await ledger.connect(
            db.conninfo,
            application_name=f"tablectl-link-{self.id}-{role}",
            connect_timeout_s=db.connect_timeout_s,
            statement_timeout_ms=db.statement_timeout_ms,
        )
        await ledger.check_schema(conn)
        return conn

    def _want_resync(self) -> None:
        self._resync.set()
        self._rows_ready.set()

    # --- MQTT ------------------------------------------------------------------------------

    async def _mqtt_loop(self) -> None:
        """The broker connection, through the one reconnect component (util/reconnect.py)."""
        m = self.config.mqtt
        await broker_reconnector(
            f"link controller's mqtt broker {m.host}:{m.port}",
            self._mqtt_connect,
            self._mqtt_session,
            self._mqtt_close,
            refused_wait_s=REFUSED_WAIT_S,
        ).run()

    async def _mqtt_connect(self) -> MqttClient:
        m = self.config.mqtt
        client = client_for(m, client_id=m.client_id or f"tablectl-link-{self.id}")
        await client.connect()
        return client

    async def _mqtt_close(self, client: MqttClient) -> None:
        self.client = None
        self._mqtt_up.clear()
        await client.disconnect()

    async def _mqtt_session(self, client: MqttClient) -> None:
        for site in self.sites:
            for leaf in ("evt", "status"):
                await client.subscribe(table_topic(site, "+", leaf))
        await client.subscribe(f"{LINK_PREFIX}/+/state")
        self.client = client
        self._published_parameters.clear()
        self._mqtt_up.set()
        self._want_resync()  # ask every table again: rows may have gone by
        log.info("link controller connected to the broker", controller=self.id)
        received = 0
        try:
            async with asyncio.TaskGroup() as session:
                # The connection's end (a ConnectionLost) ends the session too.
                session.create_task(client.wait_closed())
                async for message in client.messages():
                    self._receive(message.topic, message.payload, message.retain)
                    received += 1
                    if received % YIELD_EVERY == 0:
                        # The inbox hands messages over without suspending while it holds
                        # any: without this, a flood would starve the writer (no commits, no
                        # acks, more resends: a collapse).
                        await asyncio.sleep(0)
        except* MqttError as group:
            raise group.exceptions[0] from None

    def _receive(self, topic: str, payload: Any, retained: bool = False) -> None:
        body = payload if isinstance(payload, bytes) else str(payload or "").encode()
        if topic.startswith(LINK_PREFIX + "/"):
            self._receive_state(body, live=not retained)
            return
        where = parse_table_topic(topic)
        if where is None:
            return
        site, table, leaf = where
        ref = f"{site}/{table}"
        stream = self.streams.get(ref)
        if stream is None:
            self.counters.rows_not_linked += leaf == "evt"
            return
        if leaf == "status":
            self._receive_status(ref, body)
            return
        self.counters.rows_received += 1
        row = self._parse_row(ref, site, table, body)
        if row is None:
            return
        limit = self.config.controller.max_buffered_rows_per_table
        now = time.monotonic()
        ready = stream.offer(row, limit, now)
        if not ready:
            self.counters.rows_copies += row.seq <= stream.queued
            if row.seq <= stream.committed and now - stream.reacked_at >= REPLAY_EVERY_S:
                stream.reacked_at = now
                stream.acked = -1  # it may have missed our ack: say it again (now and then)
                self._publish_ack(stream)
            elif stream.replay_due(now, limit):
                self._ask_replay(stream)
            return
        self._rows.extend(ready)
        self._rows_ready.set()

    def _parse_row(self, ref: str, site: str, table: str, body: bytes) -> TableRow | None:
        if len(body) > MAX_EVT_BYTES:
            return self._malformed(ref, f"{len(body)} bytes, more than {MAX_EVT_BYTES}")
        try:
            header = EnvelopeHeader.model_validate_json(body)
        except ValidationError as exc:
            return self._malformed(ref, f"not an event envelope: {_first(exc)}")
        if (header.site, header.table) != (site, table):
            return self._malformed(ref, f"says it is {header.site}/{header.table}")
        model = INBOUND_EVENT_MODELS.get(header.type)
        if model is None:
            return TableRow(ref, header.seq, header.type, None, header.ts)
        try:
            record = model.model_validate_json(body).data
        except ValidationError as exc:
            # The row is in the table's journal for good: record it as refused, and ack it.
            reason = f"a malformed {header.type}: {_first(exc)}"
            log.warning("link controller: malformed row", table=ref, seq=header.seq, why=reason)
            self.counters.malformed += 1
            return TableRow(ref, header.seq, header.type, None, header.ts, malformed=reason)
        return TableRow(ref, header.seq, header.type, record, header.ts)

    def _malformed(self, ref: str, why: str) -> TableRow | None:
        """Count and log an evt message that is not one: nothing is applied or acknowledged."""
        self.counters.malformed += 1
        log.warning("link controller: refused an evt message", table=ref, why=why)
        return None

    def _receive_status(self, ref: str, body: bytes) -> None:
        if not body:
            return
        try:
            status = Status.model_validate_json(body)
        except ValidationError:
            self.counters.malformed += 1
            return
        self._rows.append(TableRow(ref, 0, "status", None, online=status.status == "online"))
        self._rows_ready.set()

    def _receive_state(self, body: bytes, *, live: bool) -> None:
        if not body:
            return
        try:
            state = LinkState.model_validate_json(body)
        except ValidationError:
            self.counters.malformed += 1
            return
        for listener in self.state_listeners:
            listener(state, live)

    def _publish(self, topic: str, payload: bytes, *, retain: bool) -> None:
        client = self.client
        if client is None:
            return
        try:
            client.publish_nowait(topic, payload, retain=retain)
            client.flush()
        except MqttError:
            pass  # disconnected: the next connection publishes it all again

    def _publish_ack(self, stream: TableStream) -> None:
        if stream.acked == stream.committed or self.client is None:
            return
        site, table = split_table(stream.ref)
        backend = self.links[self.link_of[stream.ref]].definition.backend_id
        payload = json.dumps({"acked_through_seq": stream.committed}).encode()
        self._publish(table_topic(site, table, f"ack/{backend}"), payload, retain=True)
        stream.acked = stream.committed
        self.counters.acks_published += 1

    def _ask_replay(self, stream: TableStream) -> None:
        if self.client is None:
            return
        stream.replay_asked(time.monotonic())
        site, table = split_table(stream.ref)
        command = {"from_seq": stream.queued + 1, "correlation_id": f"link-{self.id}"}
        self._publish(
            table_topic(site, table, "cmd/replay"), json.dumps(command).encode(), retain=False
        )
        self.counters.replays_asked += 1

    # --- the ledger --------------------------------------------------------------------------

    async def _writer_loop(self) -> None:
        backoff = Backoff(initial_s=0.1, max_s=5.0)
        while True:
            try:
                conn = await self._connect_ledger("writer")
            except (psycopg.Error, OSError, LedgerError) as exc:
                self._ledger_down(f"cannot reach the ledger: {exc}", backoff)
                await asyncio.sleep(backoff.next_delay())
                continue
            self.ledger_error = None
            backoff.reset()
            self._want_resync()
            try:
                await self._write_batches(conn, backoff)
            except (psycopg.OperationalError, OSError) as exc:
                self._ledger_down(f"lost the ledger: {exc}", backoff)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()
            await asyncio.sleep(backoff.next_delay())

    def _ledger_down(self, reason: str, backoff: Backoff) -> None:
        self.ledger_error = reason
        level = log.warning if backoff.first_failure else log.debug
        level("link controller: " + reason.split("\n")[0], controller=self.id)

    async def _write_batches(self, conn: Connection, backoff: Backoff) -> None:
        limit = self.config.controller.batch_max_rows
        while True:
            if self._resync.is_set() and self._mqtt_up.is_set():
                await self._resync_from(conn)
            if not self._rows:
                self._rows_ready.clear()
                await self._rows_ready.wait()
                continue
            batch = [self._rows.popleft() for _ in range(min(limit, len(self._rows)))]
            try:
                result = await ledger.apply_rows(conn, batch, by=self.id)
            except psycopg.OperationalError:
                self._want_resync()  # what was queued is replayed from the ledger's cursors
                raise
            except psycopg.Error as exc:
                # Not the connection: a statement timeout or a bug. Nothing was committed.
                self.counters.batch_failures += 1
                self._ledger_down(f"a batch failed: {type(exc).__name__}: {exc}", backoff)
                self._want_resync()
                await asyncio.sleep(backoff.next_delay())
                continue
            backoff.reset()
            self.ledger_error = None
            await self._committed(conn, result)

    async def _committed(self, conn: Connection, result: ledger.BatchResult) -> None:
        """After COMMIT: acknowledge, then tell the floor about hits and validations."""
        self.counters.batches += 1
        self.counters.rows_applied += result.applied
        for ref, seq in result.cursors.items():
            stream = self.streams.get(ref)
            if stream is None:
                continue
            stream.committed_through(seq)
            self._publish_ack(stream)
            limit = self.config.controller.max_buffered_rows_per_table
            if stream.replay_due(time.monotonic(), limit):
                self._ask_replay(stream)
        if result.answers_changed:
            # A hit or a validation: every table hears it now, not at the next tick.
            for snapshot in await ledger.snapshots(conn, sorted(result.answers_changed)):
                self._publish_state(broadcast.state_of(snapshot, self.id))
            for link_id, tables in result.answers_changed.items():
                version = self.last_states[link_id].version if link_id in self.last_states else 0
                for ref in sorted(tables):
                    found = await ledger.claim_answers(conn, link_id, ref)
                    topic, payload = broadcast.answers(link_id, ref, version, found)
                    self._publish(topic, payload, retain=True)

    async def _resync_from(self, conn: Connection) -> None:
        """Rebuild every table's stream from the ledger, acknowledge, and ask for the rest."""
        self._resync.clear()
        self.counters.resyncs += 1
        found = await ledger.links(conn)
        missing = [lk for lk in self.link_ids if lk not in found]
        if missing:
            raise LedgerError(f"links not in the ledger: {missing} (tablectl link apply)")
        cursors = await ledger.table_cursors(conn)
        self.links = {lk: found[lk] for lk in self.link_ids}
        self._rows.clear()
        self.streams = {}
        self.link_of = {}
        for ref, (link_id, seq) in cursors.items():
            if link_id in self.links:
                self.streams[ref] = TableStream(ref, seq, seq)
                self.link_of[ref] = link_id
        for stream in self.streams.values():
            self._publish_ack(stream)
            self._ask_replay(stream)  # once: it may hold rows this controller never saw
        client = self.client
        if client is not None:
            # The tables' retained statuses again, now that their streams exist (link up/down).
            with contextlib.suppress(MqttError):
                for site in self.sites:
                    await client.subscribe(table_topic(site, "+", "status"))
        for link_id, row in self.links.items():
            self._publish_parameters(row)
            for ref in sorted(r for r, lk in self.link_of.items() if lk == link_id):
                answers = await ledger.claim_answers(conn, link_id, ref)
                if answers:
                    topic, payload = broadcast.answers(link_id, ref, row.version, answers)
                    self._publish(topic, payload, retain=True)
        if not self.ready.is_set():
            self.ready.set()
            sdnotify.notify("READY=1\nSTATUS=applying rows; broadcasting")
            log.info("link controller ready", controller=self.id, links=self.link_ids)

    def _publish_parameters(self, row: LinkRow) -> None:
        if self._published_parameters.get(row.link_id) == row.parameters_version:
            return
        topic, _ = broadcast.topics(row.link_id)
        self._publish(topic, row.parameters().model_dump_json().encode(), retain=True)
        self._published_parameters[row.link_id] = row.parameters_version

    # --- broadcasts ----------------------------------------------------------------------------

    def _publish_state(self, state: LinkState) -> None:
        self.last_states[state.link_id] = state
        _, topic = broadcast.topics(state.link_id)
        self._publish(topic, state.model_dump_json().encode(), retain=True)
        self.counters.broadcasts += self.client is not None

    async def _broadcast_loop(self) -> None:
        backoff = Backoff(initial_s=0.2, max_s=5.0)
        conn: Connection | None = None
        while True:
            interval = (
                min((lk.broadcast_interval_ms for lk in self.config.link), default=500) / 1000
            )
            started = time.monotonic()
            try:
                if conn is None:
                    conn = await self._connect_ledger("broadcast")
                for snapshot in await ledger.snapshots(conn, self.link_ids):
                    known = self.links.get(snapshot.row.link_id)
                    if known is not None:
                        if known.parameters_version != snapshot.row.parameters_version:
                            self._want_resync()  # new parameters: tables may have come or gone
                        self._publish_parameters(snapshot.row)
                    self._publish_state(broadcast.state_of(snapshot, self.id))
                backoff.reset()
            except (psycopg.Error, OSError, LedgerError) as exc:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                    conn = None
                reason = f"controller {self.id} cannot read the ledger"
                level = log.warning if backoff.first_failure else log.debug
                level("link controller: " + reason, error=str(exc).split("\n")[0])
                backoff.next_delay()
                for state in list(self.last_states.values()):
                    self._publish_state(broadcast.down_state(state, self.id, reason))
            wd = sdnotify.watchdog_interval_s()
            if wd is not None:
                sdnotify.notify("WATCHDOG=1")
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    async def _housekeeping(self) -> None:
        """Once a second: ask again for rows a table has not sent (a gap that went quiet);
        every minute, the counters to the log."""
        ticks = 0
        while True:
            await asyncio.sleep(REPLAY_EVERY_S)
            ticks += 1
            if ticks % COUNTERS_EVERY_S == 0:
                log.info("link controller counters", **asdict(self.counters))
            now, limit = time.monotonic(), self.config.controller.max_buffered_rows_per_table
            for stream in self.streams.values():
                if stream.replay_due(now, limit):
                    self._ask_replay(stream)


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


class StartupError(Exception):
    """The controller cannot start: the message says why and what to do."""

    def __init__(self, message: str, *, bad_config: bool) -> None:
        super().__init__(message)
        self.bad_config = bad_config


async def check_against_ledger(config: LinkConfig) -> None:
    """Every link of the config is in the ledger with exactly these parameters."""
    db = config.database
    try:
        conn = await ledger.connect(
            db.conninfo,
            application_name="tablectl-link-check",
            connect_timeout_s=db.connect_timeout_s,
        )
    except (psycopg.Error, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StartupError(
            f"cannot reach the ledger (database.conninfo): {first}", bad_config=False
        ) from None
    try:
        await ledger.check_schema(conn)
        found = await ledger.links(conn)
    except LedgerError as exc:
        raise StartupError(str(exc), bad_config=True) from None
    finally:
        await conn.close()
    for definition in config.definitions():
        row = found.get(definition.link_id)
        if row is None:
            raise StartupError(
                f"link {definition.link_id} is not in the ledger: run `tablectl link apply`",
                bad_config=True,
            )
        if ledger.parameters_json(row.definition) != ledger.parameters_json(definition):
            raise StartupError(
                f"link {definition.link_id}: this config's parameters differ from the "
                f"ledger's (version {row.parameters_version}); `tablectl link apply` writes "
                "them, while the link is closed (NY 9 NYCRR 5321.18(b)(4))",
                bad_config=True,
            )


async def serve(config: LinkConfig) -> None:
    """`tablectl link run`: check, then serve until SIGTERM or SIGINT."""
    from tablectl.link.sign.server import SignBoard, SignServer

    await check_against_ledger(config)
    controller = Controller(config)
    extra: list[Callable[[], Coroutine[Any, Any, None]]] = []
    address = config.sign.address
    if address is not None:
        board = SignBoard(
            {lk.link_id: (lk.title, round(lk.link_timeout_s * 1000)) for lk in config.link}
        )
        controller.state_listeners.append(board.offer)
        extra.append(SignServer(board, *address).serve)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)
    log.info("link controller starting", controller=controller.id, links=controller.link_ids)
    with contextlib.suppress(asyncio.CancelledError):
        await controller.run(extra)
