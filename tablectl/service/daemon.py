"""The daemon: wires devices, the pure core, the journal, MQTT and the control socket.

Every input -- a debounced chip, the lock-out button, a shuffler report, a person's command --
goes through one queue and one consumer, so the core sees them in a single order. Each step's
input, new state and journal rows are committed *before* its effects run (seat lamps, shuffle
commands) and before the relay may publish them. Inputs that queue up while a commit is on
disk are stepped in order and committed together (group commit: one fsync for all of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import structlog
from pydantic import ValidationError

from tablectl.config import TableConfig
from tablectl.control.protocol import (
    ShufflerCount,
    ShufflerCountRequest,
    ShufflerSelfTest,
    ShufflerSelfTestRequest,
    ShufflerTestRequest,
)
from tablectl.control.server import ControlServer
from tablectl.core import decks
from tablectl.core.effects import (
    DealCards,
    Effect,
    Lamp,
    RequestShuffle,
    SeatLamp,
)
from tablectl.core.events import (
    DealRequested,
    DealRequestFailed,
    DeckClock,
    DeckInPlay,
    DeckIntroduced,
    DeliveryFault,
    DeliveryRestored,
    DeviceLinkReset,
    Event,
    PowerUp,
    ShoeCleared,
    ShoeFault,
    ShuffleCompleted,
    ShuffleRequestFailed,
    TableRules,
)
from tablectl.core.round import Phase, Rejected, TableState, step
from tablectl.drivers import registry
from tablectl.drivers.gpio.backend import GpioBackend, GpioUnavailable, Levels
from tablectl.drivers.gpio.registry import open_backend
from tablectl.drivers.gpio.table_io import TableGpio
from tablectl.drivers.reference.link import (
    DeviceReport,
    LinkDown,
    LinkError,
    cursor_key,
    parse_cursor,
)
from tablectl.drivers.shoe.base import Shoe
from tablectl.drivers.shuffler.base import Shuffler
from tablectl.drivers.transport.base import TraceWriter
from tablectl.mqtt.contract import MeterValue, ProgressiveLinkState, TableSnapshot, TableWager
from tablectl.mqtt.relay import Relay
from tablectl.service import deck_status
from tablectl.service import status as status_view
from tablectl.service.control_port import DaemonControl
from tablectl.service.dispatcher import journal_entries, journal_input
from tablectl.service.link import TableLink
from tablectl.service.pace import PaceReporter
from tablectl.service.recovery import PowerUpRecovery
from tablectl.service.shutdown import Stopper
from tablectl.service.walk_test import WalkTest
from tablectl.service.watch import Hub
from tablectl.status import (
    Dealing,
    DeviceAcceptance,
    DeviceStatus,
    FaultView,
    GpioStatus,
    Hit,
    JournalStats,
    MeterStatus,
    PaceStatus,
    Status,
)
from tablectl.store.integrity import check_integrity
from tablectl.store.integrity import refusal as integrity_refusal
from tablectl.store.journal import JournalReader, JournalRow, StepCommit, Store
from tablectl.util import sdnotify
from tablectl.util.backoff import Backoff
from tablectl.util.faultpoint import armed as fault_point_armed
from tablectl.util.faultpoint import fault_point

log = structlog.get_logger(__name__)
T = TypeVar("T")
# At most this many queued inputs share one commit (a burst's first waits for no more).
MAX_STEPS_PER_COMMIT = 512
# Batches stepped ahead of the one being written: enough that a lock-out never waits for a
# commit, few enough that a slow disk holds the inputs back (in the queue) rather than memory.
COMMITS_IN_FLIGHT = 4
DECK_CLOCK_SETTLE_S = 1.0  # after a DeckClock, before the deck clock looks again


class StartupError(Exception):
    """The daemon cannot start on this machine; the message says what to change."""


StepObserver = Callable[[Event, TableState, list[Effect]], None]
LINK_CHECK_S = 1.0  # how soon systemd's STATUS= and watchers hear of a change
SHUFFLE_RETRY_MAX_S = 30.0  # a refused SHUFFLE is asked again, backing off up to this
DEAL_ANSWER_S = 3.0  # `dealer deal` waits this long to say whether the shoe took the deal


@runtime_checkable
class ShufflerDiagnostics(Protocol):
    """What a shuffler driver provides for `tablectl shuffler count` and `self-test`.

    The reference driver has both (COUNT and SELF_TEST, docs/protocols/shuffler.md); a vendor's
    driver without them leaves the technician told that it cannot.
    """

    async def count_deck(self) -> tuple[int, int]:
        """Count the cards the shuffler holds: (counted, expected)."""
        ...

    async def self_test(self) -> tuple[bool, str]:
        """Run the device's self-test: (passed, the device's report)."""
        ...


@dataclass
class _Submission:
    event: Event
    # Resolves to the rows the command produced (type, data, seq), or raises Rejected.
    reply: asyncio.Future[list[dict[str, Any]]] | None = None
    # A device's report: its cursor is committed with the input, then the device is told.
    report: DeviceReport | None = None
    # Key-values a command commits with its input (a link reset's new cursor).
    kv: dict[str, str] | None = None
    # What a command set going that its caller waits for (a deal: did the shoe take it?).
    followup: asyncio.Task[str | None] | None = None

    def answer(
        self, rows: list[dict[str, Any]] | None = None, *, error: Exception | None = None
    ) -> None:
        """Tell whoever asked. A caller that gave up (a client gone, a timeout) cancelled
        its wait: the step stands, and there is no one to tell."""
        if self.reply is None or self.reply.done():
            return
        if error is not None:
            self.reply.set_exception(error)
        else:
            self.reply.set_result(rows or [])


@dataclass
class _Stepped:
    """One input the core stepped on, waiting for the commit it shares with others."""

    sub: _Submission
    effects: list[Effect]
    commit: StepCommit
    refusal: Rejected | None = None  # a device report the core refused: only its cursor moves


@dataclass
class _Batch:
    """Inputs stepped together and the commit that makes them durable, under way."""

    stepped: list[_Stepped]
    refused: list[tuple[_Submission, Rejected]]
    state: TableState  # the state after the batch: what others read once it is on disk
    written: asyncio.Future[list[list[JournalRow]]]


@dataclass
class Daemon:
    config: TableConfig
    # None: from config (gpio.backend); the demo and tests hand in a MockBackend.
    gpio_backend: GpioBackend | None = None
    usb_backend: Any = None  # None: pyusb's own (libusb); simulators pass a virtual bus
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    stop_deadline_s: float = 10.0  # SIGTERM to exit, at most (systemd's TimeoutStopSec is 20s)
    shuffle_retry_s: float = 1.0  # a refused SHUFFLE is asked again after this, then doubling

    def __post_init__(self) -> None:
        self.rules: TableRules = self.config.rules()
        self.game = self.rules.game.table_game()
        self.observers: list[StepObserver] = []
        self.ready = asyncio.Event()
        self._stepped = asyncio.Event()
        # Steps committed (and their effects run) since start; an observer, which sees a step
        # before its commit, knows it is done once this passes the count it saw.
        self.steps_done = 0
        # Steps taken by the core, committed or not: an observer's step is steps_taken when it
        # sees it, and done once steps_done reaches that (the core steps ahead of commits).
        self.steps_taken = 0
        self.hub = Hub()  # live events for `tablectl watch`
        self.link: TableLink | None = None  # a linked progressive's ear (service/link.py)
        self.stopping = False
        self.inputs_dropped_while_stopping = 0
        self.started_at = time.time()
        self._queue: asyncio.Queue[_Submission] = asyncio.Queue()
        # Batches stepped and being committed, oldest first (_consume -> _finish_commits).
        self._committing: asyncio.Queue[_Batch] = asyncio.Queue(maxsize=COMMITS_IN_FLIGHT)
        # Every database write happens here, one at a time, in order.
        self._journal_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._tasks: asyncio.TaskGroup | None = None
        self.gpio: TableGpio | None = None
        self.walk_test: WalkTest | None = None  # a technician's walk test (control socket)
        self.store: Store | None = None
        self.reader: JournalReader | None = None
        self.state: TableState | None = None
        self.shoe: Shoe | None = None
        self.pace: PaceReporter | None = None  # game pace, from the journal once a minute
        self._devices: dict[str, Shuffler | Shoe] = {}
        self._traces: dict[str, TraceWriter] = {}
        self._shuffle_asker: asyncio.Task[None] | None = None
        self._shuffle_wanted = asyncio.Event()  # wakes the asker from its backoff
        self._shuffle_requests = 0  # RequestShuffle effects so far: a new one is news
        # What each device says first after this start settles a command in flight to it.
        self.recovery = PowerUpRecovery(self.post)

    # --- inputs -------------------------------------------------------------------------

    def post(self, event: Event) -> None:
        """Queue an input from the table's own hardware (refused once the daemon is stopping)."""
        if self.stopping:
            # Acceptance is closed: nothing sensed after the stop signal becomes a wager.
            self.inputs_dropped_while_stopping += 1
            return
        self._queue.put_nowait(_Submission(event))

    def post_device(self, report: DeviceReport) -> None:
        """Queue a device's report; the device hears it was taken only after the commit."""
        if self.stopping:
            # Not acknowledged, so the device keeps it for the next start.
            self.inputs_dropped_while_stopping += 1
            return
        trace = self._traces.get(report.device)
        if trace is not None:
            trace.input(report.input.TYPE + " " + report.input.model_dump_json())
        self._queue.put_nowait(_Submission(report.input, report=report))

    async def submit(
        self, event: Event, *, kv: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Queue a person's command and wait for the rows it journaled; raises Rejected.
        kv: key-values to commit with it."""
        if self.stopping:
            raise Rejected("the daemon is stopping")
        self._check_devices(event)
        if isinstance(event, DealRequested) and self.shoe is not None:
            # The boot the deal goes to: after a power cut, only that boot can show it never
            # dealt (core/recovery.py).
            event = event.model_copy(update={"shoe_boot_id": self.shoe.boot_id})
        reply: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()
        sub = _Submission(event, reply, kv=kv)
        self._queue.put_nowait(sub)
        rows = await reply
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

    def _check_devices(self, event: Event) -> None:
        """What only the devices can say about a command: refused before it is journaled."""
        shoe, state = self.shoe, self.state
        if shoe is None or state is None or state.shoe_out_of_order:
            return
        if isinstance(event, DealRequested | ShoeCleared) and not shoe.link_up:
            raise Rejected(
                "the shoe link is down: check its power and cable (`tablectl devices`); or "
                "`tablectl dealer shoe-out-of-order` and deal by hand"
            )
        if isinstance(event, ShoeCleared):
            showing = shoe.fault_showing()
            if showing is not None:
                code = showing.code if isinstance(showing, ShoeFault) else "a fault"
                raise Rejected(
                    f"the shoe still reports {code}: open it, take out every card, close it, "
                    "and confirm again"
                )

    async def reset_link(self, device: str, by: str) -> list[dict[str, Any]]:
        """A technician resets a device link stopped at refused events: the events the device
        holds are skipped (journaled as such, with who) and the link takes what follows."""
        driver = self._devices.get(device)
        if driver is None:
            raise Rejected(f"this table has no {device}")
        try:
            boot, journaled, last = driver.reset_point()
        except LinkError as exc:
            raise Rejected(f"reset-link {device}: {exc}") from None
        reset = DeviceLinkReset(
            device=device, boot_id=boot, from_event_id=journaled, to_event_id=last, by=by
        )
        # The new cursor is committed with the reset: a restart goes on from there too.
        rows = await self.submit(reset, kv={cursor_key(device): f"{boot}:{last}"})
        driver.reset_to(boot, last)
        return rows

    # --- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        cfg = self.config
        try:
            self.store = store = Store(cfg.storage.database, boot_id=self.boot_id)
            self.reader = store.reader()
        except (OSError, sqlite3.Error) as exc:
            raise StartupError(f"cannot open the journal {cfg.storage.database}: {exc}") from exc
        # Nothing is built on a journal that does not prove it is whole (store/integrity.py).
        if problems := check_integrity(store, cfg.mqtt.backends):
            self.reader.close()
            store.close()
            raise StartupError(f"{cfg.storage.database}: {integrity_refusal(problems)}")
        saved = store.get("table_state")
        self.state = (
            TableState.model_validate_json(saved) if saved else TableState.initial(self.rules)
        )
        if self.state.game != self.game.name:
            store.close()
            raise StartupError(
                f"the journal {cfg.storage.database} belongs to a {self.state.game} table; "
                f"this config runs {self.game.name}: use another data_dir"
            )
        if (step := fault_point_armed()) is not None:
            log.warning("fault point armed: this daemon kills itself there (a test)", step=step)
        log.info(
            "table state loaded",
            game=self.game.name,
            phase=self.state.phase.value,
            meter_cents=self.state.meter.cents if self.state.meter else None,
            last_seq=store.last_seq,
        )
        self.shuffler: Shuffler = registry.make_shuffler(
            cfg.shuffler.driver_settings(),
            self.post_device,
            cursor=parse_cursor(store.get(cursor_key("shuffler"))),
            trace=self._trace("shuffler", cfg.shuffler.trace_file),
            usb_backend=self.usb_backend,
        )
        self._devices["shuffler"] = self.shuffler
        if cfg.shoe is not None:
            self.shoe = registry.make_shoe(
                cfg.shoe.driver_settings(),
                self.post_device,
                cursor=parse_cursor(store.get(cursor_key("shoe"))),
                trace=self._trace("shoe", cfg.shoe.trace_file),
                usb_backend=self.usb_backend,
            )
            self._devices["shoe"] = self.shoe
        self.recovery.watch(self._devices)
        self.relay = Relay(
            cfg.mqtt,
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            boot_id=self.boot_id,
            store=store,
            reader=self.reader,
            in_journal_thread=self.in_journal_thread,
            snapshot=self.snapshot,
            shuffler=self.shuffler.health,
            delivery_fault=self.state.delivery_fault,
            # The core journals a delivery fault and its end, as every other fault.
            on_delivery=lambda fault: self.post(
                DeliveryRestored() if fault is None else DeliveryFault(reason=fault)
            ),
            progressive_link=self.progressive_link,
        )
        # A linked progressive: the link controllers' broadcasts, heard (service/link.py).
        self.link = (
            None if cfg.progressive is None else TableLink(cfg, self.post, lambda: self.state)
        )
        self.pace = PaceReporter(
            cfg.storage.database,
            cfg.records,
            lambda pace: self.relay.publish_pace(pace.model_dump_json().encode()),
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
                self._tasks = tasks
                # The safe state first: nothing is accepted until the core opens a round.
                self.post(PowerUp(rules=self.rules))
                if self.rules.deck is not None:
                    # The decks aged while the daemon was down (649a.3(c)).
                    self.post(DeckClock(at_ms=self.wall_clock_ms()))
                # Then the inputs as the lines read now: chips resting, the button held.
                self.gpio.start(levels)
                # The lamps say what the journal says: recognised wagers, wins to verify.
                for seat in self.state.wagers:
                    self.gpio.set_lamp(seat, Lamp.ON)
                for hit in self.state.hits_pending:
                    self.gpio.set_lamp(hit.seat, Lamp.WIN)
                await control.start()
                tasks.create_task(self._consume(), name="table-core")
                tasks.create_task(self._finish_commits(), name="table-commits")
                tasks.create_task(self.gpio.run(), name="gpio")
                tasks.create_task(control.serve(), name="control-socket")
                tasks.create_task(self.shuffler.run(), name="shuffler")
                if self.shoe is not None:
                    tasks.create_task(self.shoe.run(), name="shoe")
                tasks.create_task(self.relay.run(), name="mqtt-relay")
                tasks.create_task(self.pace.run(), name="pace")
                if self.link is not None:
                    tasks.create_task(self.link.run(), name="progressive-link")
                tasks.create_task(self._watchdog(), name="watchdog")
                tasks.create_task(self._deck_clock(), name="deck-clock")
                # Ready once the journal is open and commands are taken; devices and the
                # broker come and go, and STATUS= says how they are (_report_links).
                self.ready.set()
                sdnotify.notify("READY=1\nSTATUS=" + status_view.status_line(self.status()))
                tasks.create_task(self._report_links(), name="link-status")
                log.info("tablectl running", table=cfg.table.table_id, boot_id=self.boot_id)
        finally:
            await control.close()
            if self.gpio:
                self.gpio.close()
            # A commit under way finishes (it is one transaction) before the database closes.
            self._journal_thread.shutdown(wait=True)
            self.relay.close()
            self.reader.close()
            store.close()
            for trace in self._traces.values():
                trace.close()

    def wall_clock_ms(self) -> int:
        """UTC milliseconds: what a deck's age is measured in (core/decks.py)."""
        return time.time_ns() // 1_000_000

    async def _deck_clock(self) -> None:
        """Tell the core the time whenever a deck's warning or age limit falls due
        (649a.3(c)); the core never reads a clock, so its decisions replay."""
        deck_rules = self.rules.deck
        if deck_rules is None:
            return
        while True:
            due = None if self.state is None else decks.next_due_ms(deck_rules, self.state.deck)
            now = self.wall_clock_ms()
            if due is not None and due <= now:
                self.post(DeckClock(at_ms=now))
                await asyncio.sleep(DECK_CLOCK_SETTLE_S)  # until the core has taken it
                continue
            # A deck introduced meanwhile brings its own times: look again within a minute.
            await asyncio.sleep(min(60.0, 60.0 if due is None else (due - now) / 1000))

    async def _deck_from_shuffler(self, opened: bool) -> None:
        """A shuffler that reports the deck it shuffled (DECK) introduces a deck the table does
        not know (649a.3): the round's deck if the shuffle opened one, else the next deck."""
        deck_rules = self.rules.deck
        if deck_rules is None:
            return
        try:
            deck = await self.shuffler.deck_loaded()
        except LinkError as exc:
            log.warning("the shuffler's deck could not be read", error=str(exc))
            return
        state = self.state
        if deck is None or state is None:
            return
        if state.deck.find(deck[0]) is not None:
            if opened and deck[0] != state.deck.round_deck:
                # 649a.3(b)(3): the round opened on another deck than the one due.
                with contextlib.suppress(Rejected):
                    await self.submit(DeckInPlay(deck_id=deck[0], source="shuffler", by="shuffler"))
            return
        due = state.deck.next_deck(deck_rules)
        shuffled = state.deck.round_deck if opened else None if due is None else due.deck_id
        full = len(state.deck.decks) >= decks.decks_needed(deck_rules)
        try:
            introduced = DeckIntroduced(
                deck_id=deck[0],
                back=deck[1],
                at_ms=self.wall_clock_ms(),
                replaces=shuffled if full else None,
                source="shuffler",
                by="shuffler",
            )
            await self.submit(introduced)
        except (ValidationError, Rejected) as exc:
            log.warning("the shuffler's deck was not introduced", deck=deck, error=str(exc))

    def _trace(self, device: str, path: Any) -> TraceWriter | None:
        if path is None:
            return None
        trace = TraceWriter.open(path, f"{device} {self.config.table.table_id} boot {self.boot_id}")
        self._traces[device] = trace
        return trace

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
        self.stopping = True  # post() drops every device input from here on
        sdnotify.notify("STOPPING=1\nSTATUS=stopping: acceptance closed")
        if self.state is not None and self.state.phase is Phase.BETTING:
            # The journal still says "betting"; the next start locks the round out first
            # (power-up), and nothing sensed from here on is a wager.
            log.warning(
                "stopping while betting: no more wagers are recognised", round=self.state.round_id
            )

    async def in_journal_thread(self, work: Callable[[], T]) -> T:
        """Run a database write in the journal thread: every write, one at a time, in order."""
        return await asyncio.get_running_loop().run_in_executor(self._journal_thread, work)

    async def _consume(self) -> None:
        """Step each batch of inputs as it comes and hand its commit to the journal thread
        without waiting for it: a lock-out edge is stepped while the commit before it is still
        being written, never behind it or its after-commit work. Commits stay in order (one
        journal thread), and a step's effects, replies and device acknowledgements wait for
        its own commit (_finish_commits)."""
        assert self.store is not None and self.state is not None
        store = self.store
        loop = asyncio.get_running_loop()
        state = self.state
        while True:
            batch = [await self._queue.get()]
            while len(batch) < MAX_STEPS_PER_COMMIT and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            state, stepped, refused = self._step_batch(state, batch)
            for item in stepped:  # a test's power cut: taken, not yet journaled
                fault_point("before-commit", item.sub.event.TYPE)
            written = loop.run_in_executor(
                self._journal_thread,
                functools.partial(store.commit_steps, [s.commit for s in stepped]),
            )
            await self._committing.put(_Batch(stepped, refused, state, written))

    def _step_batch(
        self, state: TableState, batch: list[_Submission]
    ) -> tuple[TableState, list[_Stepped], list[tuple[_Submission, Rejected]]]:
        """The core's steps for a batch: the state after it, each step with its commit, and
        the commands the core refused."""
        stepped: list[_Stepped] = []
        refused: list[tuple[_Submission, Rejected]] = []
        for sub in batch:
            report = sub.report
            kv = dict(sub.kv or {})
            if report is not None and report.cursor_value is not None:
                kv[report.cursor_key] = report.cursor_value
            try:
                new_state, effects = step(self.rules, state, sub.event)
            except Rejected as exc:
                if report is None:
                    refused.append((sub, exc))
                    continue
                # A device's report is never lost or taken twice: its cursor moves anyway.
                log.warning("device report refused", device=report.device, error=str(exc))
                commit = StepCommit(state.model_dump_json(), [], None, kv)
                stepped.append(_Stepped(sub, [], commit, refusal=exc))
                continue
            self.steps_taken += 1
            for observer in self.observers:
                observer(sub.event, new_state, effects)
            state = new_state
            # Every input is journaled with what it produced (and the device's cursor), so
            # the state can be replayed and the report is taken once.
            commit = StepCommit(
                new_state.model_dump_json(),
                journal_entries(effects),
                journal_input(sub.event),
                kv or None,
            )
            stepped.append(_Stepped(sub, effects, commit))
        return state, stepped, refused

    async def _finish_commits(self) -> None:
        """Each batch once on disk, in order: the state others read, then the effects. A
        task of the daemon's own group, beside _consume: a stop cancels both at once."""
        while True:
            batch = await self._committing.get()
            committed = await batch.written
            if any(committed):
                # Durable: the relay hands the rows to the broker first, rather than waiting
                # behind the lamps, replies and log lines below (docs/mqtt.md, Performance).
                self.relay.wake()
                await asyncio.sleep(0)
            self.state = batch.state
            for item, rows in zip(batch.stepped, committed, strict=True):
                # A test's power cut: journaled, not yet acknowledged nor acted on.
                fault_point("after-commit", item.sub.event.TYPE)
                self._after_commit(item, rows)
            self.steps_done += sum(1 for item in batch.stepped if item.refusal is None)
            for sub, refusal in batch.refused:
                sub.answer(error=refusal)
            self._stepped.set()

    def _after_commit(self, item: _Stepped, rows: list[JournalRow]) -> None:
        """A step is on disk (input, rows and device cursor): its device hears it was taken,
        its effects run, and whoever asked for it hears back."""
        report = item.sub.report
        if report is not None:
            self._devices[report.device].acknowledge(report)
        if item.refusal is not None:
            item.sub.answer(error=item.refusal)
            return
        self.hub.publish_rows(rows)
        for type_, data in item.commit.entries:
            log.info(type_, **data)
        event = item.sub.event
        if isinstance(event, ShuffleCompleted) and not event.stale and self._tasks is not None:
            opened = any(row.type == "round.opened" for row in rows)
            self._tasks.create_task(self._deck_from_shuffler(opened), name="shuffler-deck")
        item.sub.followup = self._execute(item.effects)
        item.sub.answer([{"seq": r.seq, "type": r.type, "data": r.data} for r in rows])

    async def wait_until(self, predicate: Callable[[TableState], bool], timeout_s: float) -> None:
        """Wait until the table's state satisfies predicate (simulators, tests, the demo)."""
        async with asyncio.timeout(timeout_s):
            while self.state is None or not predicate(self.state):
                self._stepped.clear()
                await self._stepped.wait()

    def _execute(self, effects: list[Effect]) -> asyncio.Task[str | None] | None:
        """Run a step's effects; the deal request, if any, for whoever waits on it."""
        assert self._tasks is not None and self.gpio is not None
        deal: asyncio.Task[str | None] | None = None
        for effect in effects:
            fault_point("effect", type(effect).__name__)  # a test's power cut, not yet sent
            if isinstance(effect, SeatLamp):
                self.gpio.set_lamp(effect.seat, effect.lamp)
            elif isinstance(effect, RequestShuffle):
                self._shuffle_requests += 1
                self._shuffle_wanted.set()
                if self._shuffle_asker is None or self._shuffle_asker.done():
                    self._shuffle_asker = self._tasks.create_task(
                        self._request_shuffle(), name="shuffle-request"
                    )
            elif isinstance(effect, DealCards):
                deal = self._tasks.create_task(
                    self._request_deal(effect.stacks), name="deal-request"
                )
        return deal

    async def _request_shuffle(self) -> None:
        """Ask the shuffler to shuffle while the core wants a deck, again and again (backing
        off) while it refuses; the core hears of a refusal once per reason, not per attempt.
        A device that fails or a link that drops never ends the daemon."""
        told: str | None = None
        backoff = Backoff(initial_s=self.shuffle_retry_s, max_s=SHUFFLE_RETRY_MAX_S)

        def wanted() -> bool:
            return self.state is not None and self.state.shuffle_requested and not self.stopping

        asked = -1
        while wanted():
            if asked != self._shuffle_requests:  # the core asked anew: its refusal is news
                asked, told = self._shuffle_requests, None
                backoff.reset()
            self._shuffle_wanted.clear()
            await self.shuffler.wait_link_up()
            if not wanted():
                return
            try:
                await self.shuffler.shuffle()
                return
            except LinkDown:
                pass  # it shows as a link fault; asked again once the link is back
            except (LinkError, OSError) as exc:
                why = exc.summary if isinstance(exc, LinkError) else str(exc)
                if why != told:
                    log.warning("shuffle request refused", error=why)
                    told = why
                    self.post(ShuffleRequestFailed(reason=why, retrying=True))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff.next_delay()):
                    await self._shuffle_wanted.wait()  # or sooner, when the core asks anew

    async def _request_deal(self, stacks: tuple[int, ...]) -> str | None:
        """Have the shoe deal; why it did not (also journaled), or None."""
        assert self.shoe is not None
        try:
            async with asyncio.timeout(10):
                await self.shoe.wait_link_up()
            await self.shoe.deal(stacks)
            return None
        except (LinkError, OSError, TimeoutError) as exc:
            why = (
                exc.summary
                if isinstance(exc, LinkError)
                else "the shoe link is down"
                if isinstance(exc, TimeoutError)
                else str(exc)
            )
            log.warning("deal request failed", error=why)
            self.post(DealRequestFailed(reason=why))
            return why

    async def _report_links(self) -> None:
        """STATUS= for systemd whenever its line changes (phase, a link, a block), and a
        line for watchers whenever a device or the broker link changes."""
        status = self.status()
        line, links = status_view.status_line(status), status_view.links(status)
        while True:
            await asyncio.sleep(LINK_CHECK_S)
            status = self.status()
            if (now := status_view.status_line(status)) != line:
                line = now
                sdnotify.notify("STATUS=" + line)
            if (now_links := status_view.links(status)) != links:
                links = now_links
                self.hub.publish({"event": "links", "links": links})

    async def shuffler_test(self, request: ShufflerTestRequest) -> ShufflerCount | ShufflerSelfTest:
        """A technician's count request or self-test, if the shuffler's driver has them."""
        cmd, driver = request.cmd, self.shuffler
        if not isinstance(driver, ShufflerDiagnostics):
            raise Rejected(
                f"{cmd}: this shuffler's driver has no count or self-test ({type(driver).__name__})"
            )
        if not driver.link_up:
            raise Rejected(f"{cmd}: the shuffler link is down")
        try:
            match request:
                case ShufflerCountRequest():
                    counted, expected = await driver.count_deck()
                    return ShufflerCount(
                        counted=counted, expected=expected, matches=counted == expected
                    )
                case ShufflerSelfTestRequest():
                    passed, report = await driver.self_test()
                    return ShufflerSelfTest(passed=passed, report=report)
        except LinkError as exc:
            raise Rejected(f"{cmd}: {exc}") from None

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
        found = status_view.table_faults(
            self.state,
            shoe=self.rules.shoe,
            devices={name: DeviceStatus.of(dev.health()) for name, dev in self._devices.items()},
            broker=self.relay.stats(),
            journal=self.reader.last_row,
            awaited=self.recovery.awaited(),
        )
        if self.rules.deck is None:
            return found
        deck_rules, now = self.rules.deck, self.wall_clock_ms()
        held = deck_status.deck_faults(deck_rules, self.game, self.state, now)
        return [*deck_status.with_deck_ids(found), *held]

    def _device_status(self, name: str, standing: str | None) -> DeviceStatus | None:
        """A device's link and its last fault: the one standing, else the last journaled."""
        device = self._devices.get(name)
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
            counters=dict(s.counters),
            journal=JournalStats(
                last_seq=self.store.last_seq,
                commits=self.store.commits,
                steps_committed=self.store.steps_committed,
            ),
            shuffler=self._device_status("shuffler", s.shuffler_fault),
            shoe=self._device_status("shoe", s.shoe_fault),
            mqtt=self.relay.stats(),
            faults=self.faults(),
            decks=None
            if self.rules.deck is None
            else deck_status.view(self.rules.deck, s, self.wall_clock_ms()),
            pace=self._pace_status(),
            link=None if self.link is None else self.link.view(s),
        )

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
