"""The daemon: wires devices, the pure core, the journal, MQTT and the control socket.

Every event -- a debounced chip, the lock-out button, a shuffler report, a dealer command --
goes through one queue and one consumer, so the core sees them in a single order. Each step's
new state and journal rows are committed in one transaction *before* its effects run
(seat lights, shuffle commands) and before the relay may publish them.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog
from gpiozero.exc import GPIOZeroError

from tablectl.config import TableConfig
from tablectl.control.server import ControlServer
from tablectl.core.round import (
    METER_ID,
    ChipSensed,
    Effect,
    Event,
    Journal,
    LockoutPressed,
    PowerUp,
    Rejected,
    ReportRestingChips,
    RequestShuffle,
    Rules,
    SeatLight,
    ShuffleRequestFailed,
    TableState,
    step,
)
from tablectl.drivers.gpio.table_io import TableGpio, make_pin_factory
from tablectl.drivers.link import LinkError
from tablectl.drivers.shuffler import ShufflerDriver
from tablectl.mqtt.relay import Relay
from tablectl.store.journal import Store
from tablectl.util import sdnotify

log = structlog.get_logger(__name__)


class StartupError(Exception):
    """The daemon cannot start on this machine; the message says what to change."""


StepObserver = Callable[[Event, TableState, list[Effect]], None]


@dataclass
class _Submission:
    event: Event
    reply: asyncio.Future[int] | None = None  # resolves to the last journal seq, or Rejected


@dataclass
class Daemon:
    config: TableConfig
    pin_factory: Any = None  # None: from config (mock for simulation, native otherwise)
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        self.rules = Rules.from_config(self.config)
        self.observers: list[StepObserver] = []
        self.ready = asyncio.Event()
        self._stepped = asyncio.Event()
        self.started_at = time.time()
        self._queue: asyncio.Queue[_Submission] = asyncio.Queue()
        # Every database write happens here, one at a time, in order.
        self._journal_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._tasks: asyncio.TaskGroup | None = None
        self.gpio: TableGpio | None = None
        self.store: Store | None = None
        self.state: TableState | None = None
        if self.pin_factory is None:
            self.pin_factory = make_pin_factory(self.config.gpio)

    # --- inputs -------------------------------------------------------------------------

    def post(self, event: Event) -> None:
        """Queue a device event (never refused)."""
        self._queue.put_nowait(_Submission(event))

    async def submit(self, event: Event) -> int:
        """Queue a dealer command and wait for it; raises Rejected if not allowed now."""
        reply: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Submission(event, reply))
        return await reply

    # --- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        cfg = self.config
        try:
            self.store = store = Store(cfg.storage.database, boot_id=self.boot_id)
        except (OSError, sqlite3.Error) as exc:
            raise StartupError(f"cannot open the journal {cfg.storage.database}: {exc}") from exc
        saved = store.get("table_state")
        self.state = (
            TableState.model_validate_json(saved) if saved else TableState.initial(self.rules)
        )
        log.info(
            "table state loaded",
            phase=self.state.phase.value,
            meter_cents=self.state.meter.cents,
            last_seq=store.last_seq,
        )
        self.shuffler = ShufflerDriver(cfg.shuffler, emit=self.post)
        self.relay = Relay(
            cfg.mqtt,
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            boot_id=self.boot_id,
            store=store,
            birth=self.birth,
            health=self.health,
            record_ack=self._record_ack,
        )
        control = ControlServer(cfg.storage.socket_path, self)
        try:
            self.gpio = TableGpio(
                cfg.gpio,
                on_chip=lambda seat, present: self.post(ChipSensed(seat, present)),
                on_lockout=lambda: self.post(LockoutPressed()),
                pin_factory=self.pin_factory,
            )
        except GPIOZeroError as exc:
            store.close()
            raise StartupError(
                f'GPIO unavailable: {exc} (without GPIO hardware, set gpio.backend = "mock")'
            ) from exc
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                # The safe state first: nothing is accepted until the core opens a round.
                self.post(PowerUp())
                for seat in range(1, cfg.table.seats + 1):
                    self.gpio.set_light(seat, seat in self.state.wagers)
                await control.start()
                tasks.create_task(self._consume(), name="table-core")
                tasks.create_task(self.shuffler.run(), name="shuffler")
                tasks.create_task(self.relay.run(), name="mqtt-relay")
                tasks.create_task(self._watchdog(), name="watchdog")
                self.ready.set()
                sdnotify.notify("READY=1\nSTATUS=table " + cfg.table.table_id + " running")
                log.info("tablectl running", table=cfg.table.table_id, boot_id=self.boot_id)
        finally:
            await control.close()
            if self.gpio:
                self.gpio.close()
            # A commit under way finishes (it is one transaction) before the database closes.
            self._journal_thread.shutdown(wait=True)
            store.close()

    async def serve(self) -> None:
        """run() until SIGTERM or SIGINT, then stop in order (the CLI's `run`)."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await self.run()
        except asyncio.CancelledError:
            sdnotify.notify("STOPPING=1")
            log.info("tablectl stopped", table=self.config.table.table_id)

    async def _consume(self) -> None:
        assert self.store is not None and self.state is not None
        while True:
            sub = await self._queue.get()
            try:
                new_state, effects = step(self.rules, self.state, sub.event)
            except Rejected as exc:
                if sub.reply:
                    sub.reply.set_exception(exc)
                continue
            for observer in self.observers:
                observer(sub.event, new_state, effects)
            entries = [(e.type, e.data) for e in effects if isinstance(e, Journal)]
            if entries or new_state != self.state:
                # In the journal thread: the loop keeps taking edges while this one fsyncs.
                await asyncio.get_running_loop().run_in_executor(
                    self._journal_thread, self.store.commit, new_state.model_dump_json(), entries
                )
            self.state = new_state
            for entry in entries:
                log.info(entry[0], **entry[1])
            self._execute(effects)
            if entries:
                self.relay.wake()
            if sub.reply:
                sub.reply.set_result(self.store.last_seq)
            self._stepped.set()

    async def wait_until(self, predicate: Callable[[TableState], bool], timeout_s: float) -> None:
        """Wait until the table's state satisfies predicate (simulators, tests, the demo)."""
        async with asyncio.timeout(timeout_s):
            while self.state is None or not predicate(self.state):
                self._stepped.clear()
                await self._stepped.wait()

    def _execute(self, effects: list[Effect]) -> None:
        assert self._tasks is not None and self.gpio is not None
        for effect in effects:
            if isinstance(effect, SeatLight):
                self.gpio.set_light(effect.seat, effect.on)
            elif isinstance(effect, RequestShuffle):
                self._tasks.create_task(self._request_shuffle(), name="shuffle-request")
            elif isinstance(effect, ReportRestingChips):
                for seat in self.gpio.resting_chips():
                    self.post(ChipSensed(seat, True))

    async def _record_ack(self, seq: int) -> bool:
        assert self.store is not None
        return await asyncio.get_running_loop().run_in_executor(
            self._journal_thread, self.store.record_ack, seq
        )

    async def _request_shuffle(self) -> None:
        await self.shuffler.wait_link_up()
        try:
            await self.shuffler.shuffle()
        except LinkError as exc:
            log.warning("shuffle request failed", error=str(exc))
            await asyncio.sleep(1)  # the core asks again; do not spin on a refusing device
            self.post(ShuffleRequestFailed(str(exc)))

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

    def birth(self) -> dict[str, Any]:
        assert self.state is not None and self.store is not None
        cfg = self.config
        return {
            "v": 1,
            "site": cfg.table.site_id,
            "table": cfg.table.table_id,
            "game": cfg.table.game,
            "boot_id": self.boot_id,
            "seats": cfg.table.seats,
            "progressive": {
                "paytable": cfg.progressive.paytable,
                "wager_cents": cfg.progressive.wager,
                "rate_bp": cfg.progressive.rate_of_progression_percent,
                "reset_cents": cfg.progressive.reset_amount,
            },
            "meters": [
                {
                    "meter_id": METER_ID,
                    "amount_cents": self.state.meter.cents,
                    "seq": self.store.last_seq,
                }
            ],
        }

    def health(self) -> dict[str, Any]:
        return {"shuffler": self.shuffler.health()}

    def status(self) -> dict[str, Any]:
        assert self.state is not None and self.store is not None and self.gpio is not None
        s = self.state
        return {
            "table": self.config.table.table_id,
            "site": self.config.table.site_id,
            "boot_id": self.boot_id,
            "uptime_s": round(time.time() - self.started_at, 1),
            "phase": s.phase.value,
            "accepting_wagers": s.accepting_wagers,
            "round_id": s.round_id,
            "wagers": {str(k): v for k, v in sorted(s.wagers.items())},
            "seat_lights": self.gpio.lights(),
            "meter": {"meter_id": METER_ID, "cents": s.meter.cents, "carry": s.meter.carry},
            "deck_ready": s.deck_ready,
            "shuffle_requested": s.shuffle_requested,
            "shuffler_fault": s.shuffler_fault,
            "blocked": s.blocked,
            "counters": s.counters,
            "journal": {"last_seq": self.store.last_seq},
            "shuffler": self.shuffler.health(),
            "mqtt": self.relay.stats(),
        }
