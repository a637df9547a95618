"""A floor of light simulated tables for the link controller: `tablectl simulate floor`.

Not N table daemons: each `LightTable` speaks only what a linked table says and hears on
the wire (docs/mqtt.md, docs/linked-progressives.md). It journals rows with a `seq` in an
outbox (in memory: durable enough for a generator), publishes them at QoS 1 on its `evt`
topic in the table contract's envelope, sends again from its lowest acknowledgement on every
(re)connect, on a `cmd/replay`, and when acknowledgements stop coming while rows wait, and
forgets nothing the controller has not acknowledged on `ack/{backend_id}`. It reads the
link's parameters to contribute with, the link's state (LINK DOWN: no wagers), and its
claims' answers. Every table has its own MQTT connection, as a floor would.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import ValidationError

from tablectl.core.effects import JackpotValidated, Record
from tablectl.link.contract import (
    ClaimAnswer,
    ClaimAnswers,
    LinkClaim,
    LinkContribution,
    LinkParameters,
    LinkState,
    answers_topic,
    parameters_topic,
    state_topic,
    table_topic,
)
from tablectl.mqtt.client import MqttClient, MqttError, Will
from tablectl.mqtt.contract import envelope_json
from tablectl.util.ids import uuid7
from tablectl.util.money import dollars

# Rows unacknowledged this long, with no ack moving, go out again; the wait doubles while
# nothing moves (up to the most), so a busy controller is not buried in copies.
RETRANSMIT_S = 10.0
RETRANSMIT_MAX_S = 30.0
WINDOW = 256  # QoS 1 publishes awaiting their PUBACK at once, as the relay's window


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class OutboxRow:
    seq: int
    type: str
    event_id: str
    ts: str
    data_json: str


@dataclass
class LightTable:
    site: str
    table: str
    link_id: str
    host: str
    port: int
    backend_id: str = "link"
    on_state: Callable[[LightTable, LinkState, float], None] | None = None
    outbox: list[OutboxRow] = field(default_factory=list)
    acked: int = 0
    sent_through: int = 0
    parameters: LinkParameters | None = None
    state: LinkState | None = None
    last_up: float = -1e18  # monotonic time of the last `up` broadcast heard
    answers: dict[str, ClaimAnswer] = field(default_factory=dict)
    publishes: int = 0
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _client: MqttClient | None = None
    _boot_id: str = field(default_factory=lambda: str(uuid7()))
    _claims: int = 0

    @property
    def ref(self) -> str:
        return f"{self.site}/{self.table}"

    @property
    def last_seq(self) -> int:
        return len(self.outbox)

    def link_up(self, now: float | None = None) -> bool:
        """What a linked table's lock-out would say: an `up` heard within the timeout."""
        if self.parameters is None or self.state is None or self.state.state == "closed":
            return False
        timeout = self.parameters.link_timeout_ms / 1000
        return (time.monotonic() if now is None else now) - self.last_up <= timeout

    # --- the journal --------------------------------------------------------------------------

    def journal(self, record: Record) -> int:
        seq = self.last_seq + 1
        self.outbox.append(
            OutboxRow(seq, record.TYPE, str(uuid7()), _now(), record.model_dump_json())
        )
        self._wake.set()
        return seq

    def contribute(self, round_id: int, seats: list[int]) -> list[int]:
        """Each seat's wager, to every level, at "no more bets" (refused while LINK DOWN)."""
        p = self.parameters
        if p is None or not self.link_up():
            return []
        return [
            self.journal(
                LinkContribution(
                    link_id=self.link_id,
                    level_id=level.level_id,
                    parameters_version=p.parameters_version,
                    round_id=round_id,
                    seat=seat,
                    wager_cents=p.wager_cents,
                    rate_bp=level.contribution_rate_bp,
                    contribution_ten_thousandths_cent=p.wager_cents * level.contribution_rate_bp,
                )
            )
            for seat in seats
            for level in p.levels
        ]

    def claim(self, round_id: int, seat: int, share_percent: int = 100) -> str:
        p = self.parameters
        if p is None:
            raise RuntimeError(f"{self.ref} has no link parameters yet")
        self._claims += 1
        claim_id = f"{round_id}-{seat}-{self._claims}"
        self.journal(
            LinkClaim(
                link_id=self.link_id,
                level_id=p.levels[0].level_id,
                parameters_version=p.parameters_version,
                claim_id=claim_id,
                round_id=round_id,
                seat=seat,
                hand="mini-royal-flush",
                cards="AsKsQs",
                share_percent=share_percent,
                rule="649a.12(e)",
            )
        )
        return claim_id

    def validate(self, claim_id: str, by: str = "floor-sim") -> int:
        return self.journal(JackpotValidated(hit_id=claim_id, by=by))

    # --- the wire -----------------------------------------------------------------------------

    def envelope(self, row: OutboxRow, *, replay: bool) -> bytes:
        return envelope_json(
            type_=row.type,
            event_id=row.event_id,
            site=self.site,
            table=self.table,
            boot_id=self._boot_id,
            seq=row.seq,
            ts=row.ts,
            replay=replay,
            data_json=row.data_json,
        )

    def publish_row(self, seq: int, *, replay: bool = False) -> asyncio.Future[None] | None:
        """Hand one outbox row to the broker now (a test's own interleaving uses this)."""
        client = self._client
        if client is None:
            return None
        done = client.publish_nowait(
            table_topic(self.site, self.table, "evt"),
            self.envelope(self.outbox[seq - 1], replay=replay),
        )
        client.flush()
        self.publishes += 1
        return done

    async def run(self, *, send: bool = True) -> None:
        """Connect, and keep connecting; `send=False` leaves the sending to the caller."""
        while True:
            try:
                await self._session(send)
            except* MqttError:
                pass
            await asyncio.sleep(0.2 + random.random() * 0.3)

    async def _session(self, send: bool) -> None:
        status = table_topic(self.site, self.table, "status")
        offline = json.dumps({"status": "offline", "boot_id": self._boot_id}).encode()
        async with MqttClient(
            self.host,
            self.port,
            client_id=f"floor-{self.site}-{self.table}",
            will=Will(status, offline, retain=True),
        ) as client:
            for topic in (
                table_topic(self.site, self.table, f"ack/{self.backend_id}"),
                table_topic(self.site, self.table, "cmd/replay"),
                parameters_topic(self.link_id),
                state_topic(self.link_id),
                answers_topic(self.link_id, self.site, self.table),
            ):
                await client.subscribe(topic)
            online = json.dumps({"status": "online", "boot_id": self._boot_id}).encode()
            await client.publish(status, online, retain=True)
            self._client = client
            self.sent_through = self.acked  # every (re)connect: again from the lowest ack
            self.connected.set()
            try:
                async with asyncio.TaskGroup() as tasks:
                    if send:
                        tasks.create_task(self._sender(), name=f"floor-send-{self.table}")
                    tasks.create_task(client.wait_closed())  # a lost connection ends the session
                    async for message in client.messages():
                        self._receive(message.topic, message.payload, message.retain)
            finally:
                self._client = None
                self.connected.clear()

    async def _sender(self) -> None:
        inflight: list[asyncio.Future[None]] = []
        last_progress = time.monotonic()
        acked_seen = self.acked
        patience = RETRANSMIT_S
        while True:
            if self.acked != acked_seen:
                acked_seen, last_progress, patience = self.acked, time.monotonic(), RETRANSMIT_S
            unacked = self.last_seq > self.acked
            if unacked and time.monotonic() - last_progress > patience:
                self.sent_through = self.acked  # no ack for a while: send them all again
                last_progress = time.monotonic()
                patience = min(RETRANSMIT_MAX_S, patience * 2)
            inflight = [f for f in inflight if not f.done()]
            while self.sent_through < self.last_seq and len(inflight) < WINDOW:
                seq = self.sent_through + 1
                done = self.publish_row(seq, replay=seq <= self.acked)
                if done is None:
                    return
                inflight.append(done)
                self.sent_through = seq
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                waits = inflight[:1] if len(inflight) >= WINDOW else []
                async with asyncio.timeout(0.5):
                    if waits:
                        await asyncio.wait(waits)
                    else:
                        await self._wake.wait()

    def _receive(self, topic: str, payload: object, retained: bool = False) -> None:
        if not isinstance(payload, bytes | bytearray) or not payload:
            return
        now = time.monotonic()
        try:
            if topic.endswith(f"/ack/{self.backend_id}"):
                self.acked = max(self.acked, int(json.loads(payload)["acked_through_seq"]))
                self._wake.set()  # the sender's window and patience move with acks
            elif topic.endswith("/cmd/replay"):
                from_seq = int(json.loads(payload)["from_seq"])
                self.sent_through = min(self.sent_through, max(self.acked, from_seq - 1))
                self._wake.set()
            elif topic == parameters_topic(self.link_id):
                self.parameters = LinkParameters.model_validate_json(payload)
            elif topic == state_topic(self.link_id):
                state = LinkState.model_validate_json(payload)
                if self.state is None or state.version >= self.state.version:
                    self.state = state
                if state.state == "up" and not retained:
                    self.last_up = now  # a retained copy may be a controller's last word
                if self.on_state is not None:
                    self.on_state(self, state, now)
            elif topic.startswith(answers_topic(self.link_id, self.site, self.table)):
                for answer in ClaimAnswers.model_validate_json(payload).answers:
                    self.answers[answer.claim_id] = answer
        except (ValidationError, ValueError, KeyError, TypeError):
            return  # a generator: garbage in, nothing done
        # Only acks and replays give the sender work (rows are journaled by `journal`, which
        # wakes it): a state broadcast to 500 tables does not wake 500 senders for nothing.
        self.changed.set()

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


def _ready(table: LightTable) -> bool:
    return table.connected.is_set() and table.link_up()


def _acked(table: LightTable) -> bool:
    return table.acked >= table.last_seq


@dataclass
class Floor:
    """N light tables on one link, site `site`, named t001, t002, ..."""

    host: str
    port: int
    link_id: str
    count: int
    site: str = "floor-sim"
    backend_id: str = "link"
    on_state: Callable[[LightTable, LinkState, float], None] | None = None
    tables: list[LightTable] = field(init=False)

    def __post_init__(self) -> None:
        width = max(3, len(str(self.count)))
        self.tables = [
            LightTable(
                self.site,
                f"t{i:0{width}d}",
                self.link_id,
                self.host,
                self.port,
                backend_id=self.backend_id,
                on_state=self.on_state,
            )
            for i in range(1, self.count + 1)
        ]

    def tables_config(self) -> str:
        """How the link's config lists these tables."""
        width = max(3, len(str(self.count)))
        return f"{self.site}/t{{{1:0{width}d}..{self.count:0{width}d}}}"

    async def run(self, *, send: bool = True) -> None:
        async with asyncio.TaskGroup() as tasks:
            for table in self.tables:
                tasks.create_task(table.run(send=send), name=f"floor-{table.table}")

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Every table connected, with the link's parameters and an `up` broadcast."""
        async with asyncio.timeout(timeout_s):
            for table in self.tables:
                await table.wait_for(functools.partial(_ready, table), timeout_s)

    def all_acked(self) -> bool:
        return all(t.acked >= t.last_seq for t in self.tables)

    async def wait_acked(self, timeout_s: float = 60.0) -> None:
        async with asyncio.timeout(timeout_s):
            for table in self.tables:
                await table.wait_for(functools.partial(_acked, table), timeout_s)

    def play_round(self, rng: random.Random, round_id: int, seats: int) -> int:
        """A round at every table: a random number of seats wager (0 to `seats`)."""
        rows = 0
        for table in self.tables:
            players = sorted(rng.sample(range(1, seats + 1), rng.randint(0, seats)))
            rows += len(table.contribute(round_id, players))
        return rows


@dataclass
class FloorPlay:
    """How a simulated floor plays: rounds, seats, claims (for `tablectl simulate floor`)."""

    rounds_per_minute: float = 60.0
    seats: int = 5
    claim_every_s: float = 0.0  # 0: no claims
    validate_after_s: float = 5.0
    seconds: float = 0.0  # 0: until stopped
    seed: int = 1


async def play(floor: Floor, how: FloorPlay, report: Callable[[str], None]) -> None:
    """Play until `how.seconds` pass (or for ever), reporting every 5 s; then wait for acks."""
    rng = random.Random(how.seed)
    loop = asyncio.get_running_loop()
    started = loop.time()
    period = 60.0 / how.rounds_per_minute
    next_round = {t.ref: started + rng.random() * period for t in floor.tables}
    rounds = dict.fromkeys(next_round, 0)
    next_claim = started + how.claim_every_s if how.claim_every_s else None
    validations: list[tuple[float, LightTable, str]] = []
    next_report = started + 5
    while not how.seconds or loop.time() - started < how.seconds:
        now = loop.time()
        for table in floor.tables:
            if now >= next_round[table.ref]:
                rounds[table.ref] += 1
                players = sorted(rng.sample(range(1, how.seats + 1), rng.randint(0, how.seats)))
                table.contribute(rounds[table.ref], players)
                next_round[table.ref] += period
        if next_claim is not None and now >= next_claim:
            winner = rng.choice([t for t in floor.tables if t.link_up()] or floor.tables)
            if winner.parameters is not None:
                claim_id = winner.claim(rounds[winner.ref], rng.randint(1, how.seats))
                validations.append((now + how.validate_after_s, winner, claim_id))
            next_claim += how.claim_every_s
        for due in [v for v in validations if v[0] <= now]:
            validations.remove(due)
            due[1].validate(due[2])
        if now >= next_report:
            report(floor_status(floor))
            next_report += 5
        await asyncio.sleep(0.02)
    await floor.wait_acked(60)
    report(floor_status(floor))


def floor_status(floor: Floor) -> str:
    rows = sum(t.last_seq for t in floor.tables)
    acked = sum(min(t.acked, t.last_seq) for t in floor.tables)
    up = sum(t.link_up() for t in floor.tables)
    state = next((t.state for t in floor.tables if t.state is not None), None)
    meter = "-" if state is None else dollars(state.amount_cents)
    pending = (
        ""
        if state is None or not state.pending
        else (" JACKPOT PENDING " + ", ".join(f"{p.table} seat {p.seat}" for p in state.pending))
    )
    return (
        f"{len(floor.tables)} tables ({up} on the link): {rows} rows journaled, {acked} "
        f"acknowledged; meter {meter}{pending}"
    )
