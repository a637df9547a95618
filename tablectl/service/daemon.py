"""The daemon: wires the dispatcher, the devices, the GPIO, the journal, MQTT and the
control socket, and says what the table looks like to the outside.

The dispatcher (service/dispatcher.py) owns the one input queue, the core's steps and the
group commit; the device supervisor (service/devices.py) owns the shuffler and the shoe. This
module builds them in order, runs them in one task group, and does what a committed step
asks: a device hears its report was taken, the lamps and the devices act, the caller hears.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import structlog
from tablectl.drivers.api import DeviceReport
from tablectl.drivers.api import ShoeDriver as Shoe
from tablectl.drivers.api import ShufflerDriver as Shuffler
from tablectl.drivers.gpio.backend import GpioBackend, GpioUnavailable, Levels
from tablectl.drivers.gpio.registry import open_backend
from tablectl.drivers.gpio.table_io import TableGpio

from tablectl.config import TableConfig
from tablectl.control.protocol import ShufflerCount, ShufflerSelfTest, ShufflerTestRequest
from tablectl.control.server import ControlServer
from tablectl.core import decks
from tablectl.core.effects import DealCards, Effect, Lamp, RequestShuffle, SeatLamp
from tablectl.core.events import (
    AckPastJournal,
    DeckClock,
    DeliveryFault,
    DeliveryRestored,
    Event,
    JournalChainChecked,
    JournalCheckPending,
    PowerUp,
    ShuffleCompleted,
    TableIdle,
    TableRules,
)
from tablectl.core.table import Phase, Rejected, TableState
from tablectl.mqtt.contract import MeterValue, ProgressiveLinkState, TableSnapshot, TableWager
from tablectl.mqtt.relay import Relay
from tablectl.service import deck_status
from tablectl.service.control_port import DaemonControl
from tablectl.service.devices import DeviceSupervisor
from tablectl.service.dispatcher import Dispatcher, StepObserver, Stepped
from tablectl.service.faults import table_faults
from tablectl.service.link import TableLink
from tablectl.service.pace import PaceReporter
from tablectl.service.shuffle_monitor import ShuffleWatch
from tablectl.service.shuffle_monitor import faults as shuffle_faults
from tablectl.service.shutdown import Stopper
from tablectl.service.watch import Hub
from tablectl.status import (
    KNOWN_DEVICES,
    Dealing,
    DeviceAcceptance,
    DeviceStatus,
    FaultView,
    GpioStatus,
    Headline,
    Hit,
    JournalStats,
    MeterStatus,
    PaceStatus,
    Status,
)
from tablectl.store.integrity import chain_problems, check_integrity
from tablectl.store.integrity import refusal as integrity_refusal
from tablectl.store.journal import JournalReader, JournalRow, Store, utc_now
from tablectl.util import sdnotify
from tablectl.util.faultpoint import armed as fault_point_armed
from tablectl.util.faultpoint import fault_point

log = structlog.get_logger(__name__)
T = TypeVar("T")
DECK_CLOCK_SETTLE_S = 1.0  # after a DeckClock, before the deck clock looks again
# The rows after which a table is not idle (649a.5(f)): a round's "no more bets", the idle
# procedure done, a deck come to the table (inspected as it came, 649a.4).
IDLE_ENDS = ("round.locked", "deck.idle_procedure_done", "deck.introduced")
LINK_CHECK_S = 1.0  # how soon systemd's STATUS= and watchers hear of a change
WAIT_CHECK_S = 1.0  # how often the waits on the devices are timed (service/waits.py)
DEAL_ANSWER_S = 3.0  # `dealer deal` waits this long to say whether the shoe took the deal


def _ts_ms(ts: str) -> int:
    """A journal row's time (ISO 8601, UTC) in UTC milliseconds."""
    return round(datetime.fromisoformat(ts).timestamp() * 1000)


def freeze_start_up() -> None:
    """What start-up made (modules, schemas, config, the state read back) lives as long as
    the process: frozen out of the garbage collector, a full collection no longer walks it.
    In a running daemon such a collection held the GIL 22-38 ms (0.1-0.2 ms frozen; 2-core
    machine, 1,000 chips/s), at a moment no one chooses: on the loop, or in the journal
    thread, with a lock-out edge waiting behind it (docs/mqtt.md, Performance). For the
    process that serves only: tests share theirs with many daemons."""
    gc.collect()  # what is garbage already is not kept for ever
    gc.freeze()


class StartupError(Exception):
    """The daemon cannot start on this machine; the message says what to change."""


@dataclass
class Daemon:
    config: TableConfig
    # None: from config (gpio.backend); the demo and tests hand in a MockBackend.
    gpio_backend: GpioBackend | None = None
    usb_backend: Any = None  # None: pyusb's own (libusb); simulators pass a virtual bus
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    stop_deadline_s: float = 10.0  # SIGTERM to exit, at most (systemd's TimeoutStopSec is 20s)
    shuffle_retry_s: float = 1.0  # a refused SHUFFLE is asked again after this, then doubling
    # A journal of at most this many rows and inputs has both chains walked before the daemon
    # starts (about a second here); a longer one is walked in the background with its rounds
    # held (docs/design.md, "A journal that proves it is whole").
    verify_before_start_rows: int = 20_000
    # The journal's and game pace's clock. bench/soak.py runs it faster,
    # so that hours of play, and pace's windows over them, pass in minutes.
    journal_clock: Callable[[], datetime] = utc_now

    def __post_init__(self) -> None:
        self.rules: TableRules = self.config.rules()
        self.game = self.rules.game.table_game()
        self.ready = asyncio.Event()
        self.hub = Hub()  # live events for `tablectl watch`
        self.link: TableLink | None = None  # a linked progressive's ear (service/link.py)
        self.started_at = time.time()
        self.dispatcher = Dispatcher(self.rules)
        self.supervisor = DeviceSupervisor(
            self.config,
            self.rules,
            self,
            boot_id=self.boot_id,
            shuffle_retry_s=self.shuffle_retry_s,
        )
        self.gpio: TableGpio | None = None
        self.store: Store | None = None
        self.reader: JournalReader | None = None
        self.pace: PaceReporter | None = None  # game pace, from the journal once a minute
        # The shuffle-integrity monitor, off the hot path (service/shuffle_monitor.py).
        self.shuffle_watch = ShuffleWatch(self.config, self.game, self.post, lambda: self.state)
        self._owns_process = False  # serve(): the process is the daemon's (freeze_start_up)
        self._idle_told_ms: int | None = None  # the core was last told of an idle table
        # A rollback found (a backend acknowledged past the journal's end): nothing past this
        # seq is handed to the relay (core/journal_checks.py).
        self._publish_through: int | None = None
        self._started_at_seq = 0  # the journal's end when this start opened it
        self._relay_reader: JournalReader | None = None

    # --- what tests, simulators and the walk test reach through the daemon ---------------

    @property
    def state(self) -> TableState | None:
        """The table as its last committed step left it."""
        return self.dispatcher.state

    @property
    def observers(self) -> list[StepObserver]:
        """Called at each step, before its commit (tests, benchmarks)."""
        return self.dispatcher.observers

    @property
    def steps_taken(self) -> int:
        return self.dispatcher.steps_taken

    @property
    def steps_done(self) -> int:
        return self.dispatcher.steps_done

    @property
    def shuffler(self) -> Shuffler:
        return self.supervisor.shuffler

    @property
    def shoe(self) -> Shoe | None:
        return self.supervisor.shoe

    @property
    def stopping(self) -> bool:
        """The stop signal came: acceptance is closed (the dispatcher takes nothing more)."""
        return not self.dispatcher.accepting

    @property
    def inputs_dropped_while_stopping(self) -> int:
        return self.dispatcher.dropped_while_stopping

    # --- inputs -------------------------------------------------------------------------

    def post(self, event: Event) -> None:
        """Queue an input from the table's own hardware (dropped once the daemon stops)."""
        self.dispatcher.post(event)

    def post_report(self, report: DeviceReport) -> None:
        """A device's report; the device hears it was taken only after the commit. Once the
        daemon stops it is not acknowledged, so the device keeps it for the next start."""
        self.dispatcher.post(report.input, report)

    async def submit(
        self, event: Event, *, kv: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Queue a person's command and wait for the rows it journaled; raises Rejected.
        kv: key-values to commit with it."""
        if self.stopping:
            raise Rejected("the daemon is stopping")
        event = self.supervisor.check_command(event)
        sub = await self.dispatcher.submit(event, kv)
        assert sub.reply is not None
        rows = sub.reply.result()
        if sub.followup is not None:
            # The dealer hears whether the shoe took the deal, not only that it was asked.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DEAL_ANSWER_S):
                    refused = await asyncio.shield(sub.followup)
                if refused is not None:
                    raise Rejected(
                        f"the shoe did not take the deal: {refused} (journaled); see "
                        "`tablectl status`, then ask again"
                    )
        return rows

    async def reset_link(self, device: str, by: str) -> list[dict[str, Any]]:
        return await self.supervisor.reset_link(device, by)

    async def shuffler_test(self, request: ShufflerTestRequest) -> ShufflerCount | ShufflerSelfTest:
        return await self.supervisor.shuffler_test(request)

    async def in_journal_thread(self, work: Callable[[], T]) -> T:
        """Run a database write in the journal thread: every write, one at a time, in order."""
        return await self.dispatcher.in_journal_thread(work)

    async def wait_until(self, predicate: Callable[[TableState], bool], timeout_s: float) -> None:
        """Wait until the table's state satisfies predicate (simulators, tests, the demo)."""
        await self.dispatcher.wait_until(predicate, timeout_s)

    # --- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        cfg = self.config
        try:
            self.store = store = Store(
                cfg.storage.database,
                boot_id=self.boot_id,
                clock=self.journal_clock,
            )
            self.reader = store.reader()
        except (OSError, sqlite3.Error) as exc:
            raise StartupError(f"cannot open the journal {cfg.storage.database}: {exc}") from exc
        # Nothing is built on a journal that does not prove it is whole (store/integrity.py).
        if problems := check_integrity(store, cfg.mqtt.backends):
            self.reader.close()
            store.close()
            raise StartupError(f"{cfg.storage.database}: {integrity_refusal(problems)}")
        self._started_at_seq = store.last_seq
        walk_later = store.last_seq + store.head.input_seq > self.verify_before_start_rows
        if not walk_later and (broken := chain_problems(store._db)):
            self.reader.close()
            store.close()
            raise StartupError(f"{cfg.storage.database}: {integrity_refusal(broken)}")
        saved = store.get("table_state")
        state = TableState.model_validate_json(saved) if saved else TableState.initial(self.rules)
        if state.rolled_back is not None:  # found before; the start refused it otherwise
            self._publish_through = state.rolled_back.last_seq
        if state.game != self.game.name:
            store.close()
            raise StartupError(
                f"the journal {cfg.storage.database} belongs to a {state.game} table; "
                f"this config runs {self.game.name}: use another data_dir"
            )
        self.dispatcher.open(store, state, self)
        if (step := fault_point_armed()) is not None:
            log.warning("fault point armed: this daemon kills itself there (a test)", step=step)
        log.info(
            "table state loaded",
            game=self.game.name,
            phase=state.phase.value,
            meter_cents=state.meter.cents if state.meter else None,
            last_seq=store.last_seq,
        )
        self.supervisor.open(store, self.usb_backend)
        # The relay reads the journal through its own bound: a rollback found stops it there.
        self._relay_reader = relay_reader = JournalReader(store.path, bound=self._publishable)
        self.relay = Relay(
            cfg.mqtt,
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            boot_id=self.boot_id,
            store=store,
            reader=relay_reader,
            in_journal_thread=self.in_journal_thread,
            snapshot=self.snapshot,
            shuffler=self.shuffler.health,
            delivery_fault=state.delivery_fault,
            # The core journals a delivery fault and its end, as every other fault.
            on_delivery=lambda fault: self.post(
                DeliveryRestored() if fault is None else DeliveryFault(reason=fault)
            ),
            progressive_link=self.progressive_link,
            on_ack_past_end=self._ack_past_end,
        )
        # A linked progressive: the link controllers' broadcasts, heard (service/link.py).
        self.link = (
            None if cfg.progressive is None else TableLink(cfg, self.post, lambda: self.state)
        )
        self.pace = PaceReporter(
            cfg.storage.database,
            cfg.records,
            lambda pace: self.relay.publish_pace(pace.model_dump_json().encode()),
            clock=self.journal_clock,
        )
        control = ControlServer(cfg.storage.socket_path, DaemonControl(self), cfg.access)
        try:
            backend, levels = await self._open_gpio()
        except GpioUnavailable as exc:
            store.close()
            raise StartupError(f"GPIO unavailable: {exc}") from None
        self.gpio = TableGpio(
            cfg.gpio.driver_settings(), backend, seats=cfg.table.seats, emit=self.post
        )
        if backend.info.polled:
            log.warning(
                "GPIO is polled: edges are stamped at each read",
                resolution_ns=backend.info.resolution_ns,
                chip=backend.info.where,
            )
        try:
            async with asyncio.TaskGroup() as tasks:
                # The safe state first: nothing is accepted until the core opens a round.
                self.post(PowerUp(rules=self.rules))
                if walk_later:
                    # No round opens until both chains have been walked whole.
                    head = store.head
                    self.post(
                        JournalCheckPending(through_seq=head.seq, through_input=head.input_seq)
                    )
                    tasks.create_task(self._walk_chains(head.seq, head.input_seq), name="chains")
                if self.rules.deck is not None:
                    # The decks aged while the daemon was down (649a.3(c)).
                    self.post(DeckClock(at_ms=self.wall_clock_ms()))
                # Then the inputs as the lines read now: chips resting, the button held.
                self.gpio.start(levels)
                # The lamps say what the journal says: recognised wagers, wins to verify.
                for seat in state.wagers:
                    self.gpio.set_lamp(seat, Lamp.ON)
                for hit in state.hits_pending:
                    self.gpio.set_lamp(hit.seat, Lamp.WIN)
                await control.start()
                tasks.create_task(self.dispatcher.consume(), name="table-core")
                tasks.create_task(self.dispatcher.watch_journal(), name="table-journal")
                tasks.create_task(self.dispatcher.finish_commits(), name="table-commits")
                tasks.create_task(self.gpio.run(), name="gpio")
                tasks.create_task(control.serve(), name="control-socket")
                self.supervisor.start(tasks)
                tasks.create_task(self.relay.run(), name="mqtt-relay")
                tasks.create_task(self.pace.run(), name="pace")
                if self.link is not None:
                    tasks.create_task(self.link.run(), name="progressive-link")
                tasks.create_task(self._watchdog(), name="watchdog")
                tasks.create_task(self._deck_clock(), name="deck-clock")
                tasks.create_task(self._watch_waits(), name="device-waits")
                tasks.create_task(self.shuffle_watch.run(), name="shuffle-integrity")
                if self._owns_process:
                    freeze_start_up()
                # Ready once the journal is open and commands are taken; devices and the
                # broker come and go, and STATUS= says how they are (_report_links).
                self.ready.set()
                sdnotify.notify("READY=1\nSTATUS=" + self.headline().status_line())
                tasks.create_task(self._report_links(), name="link-status")
                log.info("tablectl running", table=cfg.table.table_id, boot_id=self.boot_id)
        finally:
            await control.close()
            if self.gpio:
                self.gpio.close()
            self.dispatcher.close()
            self.relay.close()
            relay_reader.close()
            self.reader.close()
            store.close()
            self.supervisor.close()

    def _publishable(self) -> int:
        """The last seq the relay may read: the last durable commit, or where a rollback was
        found (core/journal_checks.py)."""
        assert self.store is not None
        last = self.store.last_seq
        return last if self._publish_through is None else min(last, self._publish_through)

    def _ack_past_end(self, backend: str, seq: int, last_seq: int) -> None:
        """A registered backend acknowledged past the journal's end: nothing more leaves from
        now on, and the core journals the fault (it holds the table)."""
        if self._publish_through is not None:
            return  # found already: nothing more leaves
        # The rows this start journaled have seqs that backend holds with other content:
        # not even those leave again.
        self._publish_through = min(last_seq, self._started_at_seq)
        log.error(
            "a backend acknowledged rows past the journal's end: the journal was rolled back; "
            "nothing more is published",
            backend=backend,
            acked_through_seq=seq,
            last_seq=last_seq,
        )
        self.post(AckPastJournal(backend_id=backend, acked_through_seq=seq, last_seq=last_seq))

    async def _walk_chains(self, through_seq: int, through_input: int) -> None:
        """Both hash chains walked whole on a reader of its own, in a thread (the rounds are
        held meanwhile); the core hears the outcome."""
        assert self.store is not None
        reader = JournalReader(self.store.path)
        try:
            broken = await asyncio.to_thread(chain_problems, reader._db)
        finally:
            reader.close()
        log.info("journal chains walked", through_seq=through_seq, broken=len(broken))
        self.post(
            JournalChainChecked(
                through_seq=through_seq,
                through_input=through_input,
                broken=broken[0].text() if broken else None,
            )
        )

    def wall_clock_ms(self) -> int:
        """UTC milliseconds: what a deck's age is measured in (core/decks.py)."""
        return time.time_ns() // 1_000_000

    async def _deck_clock(self) -> None:
        """Tell the core the time whenever a deck's warning or age limit (649a.3(c)) or the
        idle procedure (649a.5(f)) falls due; the core never reads a clock, so its decisions
        replay."""
        if self.rules.deck is None:
            return
        while True:
            delay_s = self.deck_clock_tick()
            await asyncio.sleep(delay_s)

    def deck_clock_tick(self) -> float:
        """One look at the decks' clock (the loop above; tests on a clock): the input due now,
        if any, and how long until the next look (seconds)."""
        deck_rules = self.rules.deck
        state = self.state
        if deck_rules is None or state is None:
            return 60.0
        due = decks.next_due_ms(deck_rules, state.deck)
        now = self.wall_clock_ms()
        if due is not None and due <= now:
            self.post(DeckClock(at_ms=now))
            return DECK_CLOCK_SETTLE_S  # until the core has taken it
        idle = self._idle_due(deck_rules.idle_ms, state)
        if idle is not None and idle[1] <= now:
            self.post(TableIdle(since_ms=idle[0], at_ms=now))
            self._idle_told_ms = now  # not told again for another idle time
            return DECK_CLOCK_SETTLE_S
        # A deck introduced or a round locked meanwhile brings its own times: a minute.
        nearest = min(
            (t for t in (due, None if idle is None else idle[1]) if t is not None), default=None
        )
        return min(60.0, 60.0 if nearest is None else (nearest - now) / 1000)

    def _idle_due(self, idle_ms: int | None, state: TableState) -> tuple[int, int] | None:
        """(since, due): the last activity -- a round's "no more bets", the last idle
        procedure, a deck introduced, this start -- and when the idle time runs out from it
        (or from the last time the core was told, if it found the table in play)."""
        if idle_ms is None or state.deck.idle_due_ms is not None or self.reader is None:
            return None
        row = self.reader.last_row(IDLE_ENDS, {})
        since = round(self.started_at * 1000) if row is None else _ts_ms(row[1])
        told = self._idle_told_ms
        return since, max(since, told or 0) + idle_ms

    async def _watch_waits(self) -> None:
        """A shuffle or deal a device took and never completed becomes a journaled fault
        (service/waits.py decides on its clock; the core journals it if it still waits)."""
        while True:
            await asyncio.sleep(WAIT_CHECK_S)
            self.check_waits()

    def check_waits(self) -> None:
        """Hand the core each wait that has become a stall (the loop above; tests on a clock)."""
        for stalled in self.supervisor.stalls():
            log.warning("a device command stalled", **stalled.model_dump())
            self.post(stalled)

    async def _open_gpio(self) -> tuple[GpioBackend, Levels]:
        if self.gpio_backend is not None:
            return self.gpio_backend, await self.gpio_backend.open()
        return await open_backend(
            self.config.gpio.driver_settings(),
            seats=self.config.table.seats,
            simulator_socket=self.config.simulator_socket,
        )

    async def serve(self) -> None:
        """run() until SIGTERM or SIGINT, then stop in bounded time (the CLI's `run`)."""
        task = asyncio.current_task()
        assert task is not None
        stopper = Stopper(
            task, close_acceptance=self.close_acceptance, deadline_s=self.stop_deadline_s
        )
        stopper.install()
        self._owns_process = True
        try:
            await self.run()
        except asyncio.CancelledError:
            log.info(
                "tablectl stopped",
                table=self.config.table.table_id,
                inputs_dropped_while_stopping=self.inputs_dropped_while_stopping,
            )
        finally:
            stopper.uninstall()

    def close_acceptance(self) -> None:
        """The stop signal: from now on no chip edge, button or command reaches the core."""
        self.dispatcher.accepting = False  # every input and command is dropped from here on
        if self.gpio is not None:
            self.gpio.stop_listening()
        sdnotify.notify("STOPPING=1\nSTATUS=stopping: acceptance closed")
        if self.state is not None and self.state.phase is Phase.BETTING:
            # The journal still says "betting"; the next start locks the round out first
            # (power-up), and nothing sensed from here on is a wager.
            log.warning(
                "stopping while betting: no more wagers are recognised", round=self.state.round_id
            )

    # --- after a commit (the dispatcher's AfterCommit) -----------------------------------

    def durable(self, rows: list[JournalRow]) -> None:
        # The relay hands the rows to the broker first, rather than waiting behind the
        # lamps, replies and log lines of committed() (docs/mqtt.md, Performance).
        if self._publish_through is None:
            self.relay.offer(rows)

    def committed(self, item: Stepped, rows: list[JournalRow]) -> None:
        """A step is on disk (input, rows and device cursor): its device hears it was taken,
        its effects run, and whoever asked for it hears back."""
        report = item.sub.report
        if report is not None:
            self.supervisor.acknowledge(report)
        if item.refusal is not None:
            item.sub.answer(error=item.refusal)
            return
        self.hub.publish_rows(rows)
        for row in rows:
            log.info(row.type, **row.data)
        event = item.sub.event
        if isinstance(event, ShuffleCompleted) and not event.stale:
            self.supervisor.shuffled(opened=any(row.type == "round.opened" for row in rows))
        item.sub.followup = self._execute(item.effects)
        self.shuffle_watch.committed(item.state, rows)
        item.sub.answer([{"seq": r.seq, "type": r.type, "data": r.data} for r in rows])

    def _execute(self, effects: list[Effect]) -> asyncio.Task[str | None] | None:
        """Run a step's effects; the deal request, if any, for whoever waits on it."""
        assert self.gpio is not None
        deal: asyncio.Task[str | None] | None = None
        for effect in effects:
            fault_point("effect", type(effect).__name__)  # a test's power cut, not yet sent
            if isinstance(effect, SeatLamp):
                self.gpio.set_lamp(effect.seat, effect.lamp)
            elif isinstance(effect, RequestShuffle):
                self.supervisor.want_shuffle()
            elif isinstance(effect, DealCards):
                deal = self.supervisor.deal(effect.stacks)
        return deal

    async def _report_links(self) -> None:
        """STATUS= for systemd whenever its line changes (phase, a link, a block), and a
        line for watchers whenever a device or the broker link changes."""
        headline = self.headline()
        line, links = headline.status_line(), headline.links
        while True:
            await asyncio.sleep(LINK_CHECK_S)
            headline = self.headline()
            if (now := headline.status_line()) != line:
                line = now
                sdnotify.notify("STATUS=" + line)
            if headline.links != links:
                links = headline.links
                self.hub.publish({"event": "links", "links": links})

    async def _watchdog(self) -> None:
        interval = sdnotify.watchdog_interval_s()
        if interval is None:
            return
        while True:
            # Sent from the event loop, so a wedged loop stops the keep-alives and systemd
            # restarts the daemon (which comes back in the safe, locked-out state).
            sdnotify.notify("WATCHDOG=1")
            await asyncio.sleep(interval)

    # --- what the outside sees ---------------------------------------------------------

    def snapshot(self) -> TableSnapshot:
        """The table as a birth message tells it (the relay adds the delivery fields)."""
        assert self.state is not None and self.reader is not None
        cfg = self.config
        meters = []
        # A linked meter is the link's: its amount is on the link's state topic, not here.
        if self.state.meter is not None and self.state.meter.kind == "local":
            meter_id = self.state.meter.meter_id
            last = self.reader.last_meter_row(meter_id)
            if last is not None:  # the journal's reading, with the row that set it
                seq, ts, cents = last
                meters.append(MeterValue(meter_id=meter_id, amount_cents=cents, seq=seq, ts=ts))
            else:  # no row has changed it yet: the initial amount
                meters.append(
                    MeterValue(
                        meter_id=meter_id, amount_cents=self.state.meter.cents, seq=0, ts=None
                    )
                )
        return TableSnapshot(
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            game=cfg.game,
            boot_id=self.boot_id,
            seats=cfg.table.seats,
            table_wager=TableWager(
                name=self.game.table_wager.name,
                title=self.game.table_wager.title,
                wager_cents=self.game.wager_cents,
            ),
            meters=meters,
            hits_pending=list(self.state.hits_pending),
            hit_history=list(self.state.hit_history),
        )

    def progressive_link(self) -> ProgressiveLinkState | None:
        """A linked table's LINK DOWN (or up), as health and status say it."""
        if self.link is None or self.state is None:
            return None
        down = self.state.link_down
        return ProgressiveLinkState(
            link_id=self.link.link_id, link="up" if down is None else "down", reason=down
        )

    def faults(self) -> list[FaultView]:
        """What stands in the way, each with since when and what clears it."""
        assert self.state is not None and self.reader is not None
        found = table_faults(
            self.state,
            shoe=self.rules.shoe,
            devices={name: DeviceStatus.of(h) for name, h in self.supervisor.health().items()},
            broker=self.relay.link(),
            journal=self.reader.last_row,
            awaited=self.supervisor.recovery.awaited(),
            event_id_max=self.supervisor.event_id_max,
        )
        found += shuffle_faults(self.state, self.reader.last_row)
        if self.rules.deck is None:
            return found
        deck_rules, now = self.rules.deck, self.wall_clock_ms()
        held = deck_status.deck_faults(deck_rules, self.game, self.state, now)
        return [*deck_status.with_deck_ids(found), *held]

    def headline(self) -> Headline:
        """status().headline() without the rest of a status: each second, on the loop."""
        assert self.state is not None
        health = self.supervisor.health()
        links: dict[str, str] = {
            name: DeviceStatus.of(health[name]).link for name in KNOWN_DEVICES if name in health
        }
        links["gpio"] = "fault" if self.state.gpio_fault else "up"
        links["broker"] = "connected" if self.relay.connected else "disconnected"
        return Headline(
            phase=self.state.phase,
            round_id=self.state.round_id,
            links=links,
            link_down=None if self.link is None else self.state.link_down,
            faults=self.faults(),
        )

    def _device_status(self, name: str, standing: str | None) -> DeviceStatus | None:
        """A device's link and its last fault: the one standing, else the last journaled."""
        device = self.supervisor.drivers.get(name)
        if device is None:
            return None
        assert self.reader is not None
        last = standing
        if last is None:
            row = self.reader.last_row((f"{name}.fault",), {})
            last = None if row is None else f"{row[2].get('code')} (cleared; seq {row[0]})"
        return DeviceStatus.of(device.health(), last)

    def status(self) -> Status:
        assert self.state is not None and self.store is not None and self.gpio is not None
        s = self.state
        return Status(
            table=self.config.table.table_id,
            site=self.config.table.site_id,
            game=self.game.name,
            boot_id=self.boot_id,
            uptime_s=round(time.time() - self.started_at, 1),
            phase=s.phase,
            accepting_wagers=s.accepting_wagers,
            round_id=s.round_id,
            table_wager=self.game.table_wager.name,
            wagers={str(k): v for k, v in sorted(s.wagers.items())},
            undecided_seats=list(s.undecided),
            count_final=s.counted or s.phase is not Phase.LOCKED,
            seat_lamps=[Lamp(lamp) for lamp in self.gpio.lamps()],
            meter=None
            if s.meter is None
            else MeterStatus(meter_id=s.meter.meter_id, cents=s.meter.cents, carry=s.meter.carry),
            hits_pending=[Hit.of(h) for h in s.hits_pending],
            hit_history=[Hit.of(h) for h in s.hit_history],
            deck_ready=s.deck_ready,
            shuffle_requested=s.shuffle_requested,
            shuffler_fault=s.shuffler_fault,
            shoe_fault=s.shoe_fault,
            gpio_fault=s.gpio_fault,
            lockout_held=s.lockout_held,
            sensor_test=s.sensor_test,
            gpio=GpioStatus.model_validate(self.gpio.status()),
            blocked=s.blocked,
            dealing=None
            if s.deal is None
            else Dealing(
                seats=list(s.deal.seats),
                stacks=list(s.deal.stacks),
                cards_read=len(s.deal.cards),
                complete=s.deal.complete,
            ),
            shoe_out_of_order=s.shoe_out_of_order,
            device_acceptance={
                name: DeviceAcceptance(accepted=serial, waiting=s.devices_pending.get(name))
                for name, serial in sorted(s.devices.items())
            },
            counters=s.counters.model_dump(),
            journal=JournalStats(
                last_seq=self.store.last_seq,
                commits=self.store.commits,
                steps_committed=self.store.steps_committed,
            ),
            shuffler=self._device_status("shuffler", s.shuffler_fault or self._shuffle_suspect()),
            shoe=self._device_status("shoe", s.shoe_fault),
            mqtt=self.relay.stats(),
            faults=self.faults(),
            waits=self.supervisor.waits.views(s, self.supervisor.health()),
            decks=None
            if self.rules.deck is None
            else deck_status.view(self.rules.deck, s, self.wall_clock_ms()),
            pace=self._pace_status(),
            link=None if self.link is None else self.link.view(s),
        )

    def _shuffle_suspect(self) -> str | None:
        """The SHUFFLE SUSPECT standing, as the shuffler's last fault in `devices`."""
        suspect = None if self.state is None else self.state.shuffle.suspect
        if suspect is None:
            return None
        return f"shuffle-suspect ({suspect.test}, p = {suspect.p_value:.2g})"

    def _pace_status(self) -> PaceStatus | None:
        """The rolling period and the shift now running, as last computed (service/pace.py)."""
        pace = None if self.pace is None else self.pace.latest
        if pace is None:
            return None
        shift = pace.shifts[-1] if pace.shifts else None
        return PaceStatus(
            ts=pace.ts,
            rolling=pace.rolling,
            shift=None if shift is None else shift.shift,
            shift_figures=None if shift is None else shift.figures,
        )
