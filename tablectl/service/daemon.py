"""The daemon: builds the table's parts and connects them -- the dispatcher, the devices,
the GPIO, the journal, MQTT and the control socket -- and runs them in one task group.

The dispatcher (service/dispatcher.py) owns the one input queue, the core's steps and the
group commit; the device supervisor (service/devices.py) owns the shuffler and the shoe; the
effect runner (service/effects.py) does what a committed step asks; the status view
(service/status_view.py) says what the table looks like to the outside; the clocks
(service/clocks.py) tell the core the time when something falls due; start-up
(service/startup.py) opens the journal and the GPIO, and bounds what may be published.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
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
from tablectl.drivers.gpio.backend import GpioBackend
from tablectl.drivers.gpio.table_io import TableGpio

from tablectl.config import TableConfig
from tablectl.control.protocol import ShufflerCount, ShufflerSelfTest, ShufflerTestRequest
from tablectl.control.server import ControlServer
from tablectl.core.effects import Lamp
from tablectl.core.events import (
    DeckClock,
    DeliveryFault,
    DeliveryRestored,
    Event,
    JournalCheckPending,
    PowerUp,
    TableRules,
)
from tablectl.core.table import Phase, Rejected, TableState
from tablectl.mqtt.relay import Relay
from tablectl.service.clocks import TableClocks
from tablectl.service.control_port import DaemonControl
from tablectl.service.devices import DeviceSupervisor
from tablectl.service.dispatcher import GIL_SWITCH_S, Dispatcher, StepObserver
from tablectl.service.effects import EffectRunner
from tablectl.service.link import TableLink
from tablectl.service.pace import PaceReporter
from tablectl.service.shuffle_monitor import ShuffleWatch
from tablectl.service.shutdown import Stopper
from tablectl.service.startup import (
    PublishBound,
    StartupError,
    open_gpio,
    open_journal,
    walk_chains,
)
from tablectl.service.status_view import StatusView
from tablectl.service.watch import Hub
from tablectl.status import FaultView, Headline, Status
from tablectl.store.journal import JournalReader, Store, utc_now
from tablectl.util import heap, sdnotify
from tablectl.util.faultpoint import armed as fault_point_armed

__all__ = ["Daemon", "StartupError", "freeze_start_up"]
log = structlog.get_logger(__name__)
T = TypeVar("T")
DEAL_ANSWER_S = 3.0  # `dealer deal` waits this long to say whether the shoe took the deal


def freeze_start_up() -> None:
    """What start-up made (modules, schemas, config, the state read back) lives as long as
    the process: frozen out of the garbage collector, a full collection no longer walks it.
    In a running daemon such a collection held the GIL 22-38 ms (0.1-0.2 ms frozen; 2-core
    machine, 1,000 chips/s), at a moment no one chooses: on the loop, or in the journal
    thread, with a lock-out edge waiting behind it (docs/mqtt.md, Performance). For the
    process that serves only: tests share theirs with many daemons."""
    gc.collect()  # what is garbage already is not kept for ever
    gc.freeze()


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
        self.clocks = TableClocks(
            self.rules,
            self.supervisor,
            post=self.post,
            state=lambda: self.state,
            reader=lambda: self.reader,
            wall_clock_ms=self.wall_clock_ms,
            started_at=self.started_at,
        )
        self.view = StatusView(self)  # what status, devices, STATUS= and the relay show
        self.bound: PublishBound | None = None  # how far the relay may read (startup.py)
        self._owns_process = False  # serve(): the process is the daemon's (freeze_start_up)

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

    async def _between_rounds(self, timeout_s: float) -> None:
        """A quiet moment: no wager is recognised, so no chip or lock-out can wait."""
        await self.dispatcher.wait_until(lambda s: s.phase is Phase.CLOSED, timeout_s)

    # --- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        cfg = self.config
        # Nothing is built on a journal that does not prove it is whole (store/integrity.py).
        opened = open_journal(
            cfg,
            self.rules,
            self.game.name,
            boot_id=self.boot_id,
            clock=self.journal_clock,
            verify_before_start_rows=self.verify_before_start_rows,
        )
        store, state, walk_later = opened.store, opened.state, opened.walk_later
        self.store, self.reader = store, opened.reader
        self.bound = bound = PublishBound(store, state, self.post)
        self.dispatcher.open(store, state, EffectRunner(self, bound.publishing))
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
        relay_reader = JournalReader(store.path, bound=bound.publishable)
        self.relay = Relay(
            cfg.mqtt,
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            boot_id=self.boot_id,
            store=store,
            reader=relay_reader,
            in_journal_thread=self.in_journal_thread,
            snapshot=self.view.snapshot,
            shuffler=self.shuffler.health,
            delivery_fault=state.delivery_fault,
            # The core journals a delivery fault and its end, as every other fault.
            on_delivery=lambda fault: self.post(
                DeliveryRestored() if fault is None else DeliveryFault(reason=fault)
            ),
            progressive_link=self.view.progressive_link,
            on_ack_past_end=bound.ack_past_end,
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
            self.gpio, levels = await open_gpio(cfg, self.gpio_backend, self.post)
        except StartupError:
            store.close()
            raise
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
                    tasks.create_task(
                        walk_chains(store, head.seq, head.input_seq, self.post), name="chains"
                    )
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
                tasks.create_task(sdnotify.keep_alive(), name="watchdog")
                tasks.create_task(self.clocks.deck_clock(), name="deck-clock")
                tasks.create_task(self.clocks.watch_waits(), name="device-waits")
                tasks.create_task(self.shuffle_watch.run(), name="shuffle-integrity")
                tasks.create_task(heap.give_back_periodically(self._between_rounds), name="heap")
                if self._owns_process:
                    freeze_start_up()
                # Ready once the journal is open and commands are taken; devices and the
                # broker come and go, and STATUS= says how they are (report_links).
                self.ready.set()
                sdnotify.notify("READY=1\nSTATUS=" + self.headline().status_line())
                tasks.create_task(self.view.report_links(self.hub), name="link-status")
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

    def wall_clock_ms(self) -> int:
        """UTC milliseconds: what a deck's age is measured in (core/decks.py)."""
        return time.time_ns() // 1_000_000

    async def serve(self) -> None:
        """run() until SIGTERM or SIGINT, then stop in bounded time (the CLI's `run`)."""
        task = asyncio.current_task()
        assert task is not None
        stopper = Stopper(
            task, close_acceptance=self.close_acceptance, deadline_s=self.stop_deadline_s
        )
        stopper.install()
        self._owns_process = True
        # Process-wide, so set here where the process is the daemon's alone (not by run(),
        # which tests and benches share): the loop gets the GIL back from the journal
        # thread within about one step's JSON (GIL_SWITCH_S; docs/mqtt.md, Performance).
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        try:
            await self.run()
        except asyncio.CancelledError:
            log.info(
                "tablectl stopped",
                table=self.config.table.table_id,
                inputs_dropped_while_stopping=self.inputs_dropped_while_stopping,
            )
        finally:
            sys.setswitchinterval(switch_interval)
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

    # --- what the outside sees (service/status_view.py) ---------------------------------

    def status(self) -> Status:
        return self.view.status()

    def headline(self) -> Headline:
        return self.view.headline()

    def faults(self) -> list[FaultView]:
        return self.view.faults()
