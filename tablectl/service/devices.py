"""The device supervisor: the shuffler and the shoe, their links, and what the core asks of them.

It builds each device's driver from the config and the journal's cursor, runs it, refuses a
command only the devices can refuse (a deal with the shoe's link down), asks the shuffler to
shuffle while the core wants a deck (backing off while it refuses), has the shoe deal, reads
the deck a shuffler reports, and resets a link a technician clears. Each device's report
reaches the core through the dispatcher's queue (`post_report`); the device hears that it was
taken once its commit is on disk (`acknowledge`). Drivers are found by name
(tablectl.drivers.api): nothing here names one; the daemon is one `DeviceHost`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol

import structlog
from pydantic import ValidationError
from tablectl.drivers.api import (
    DeviceDriver,
    DeviceReport,
    DriverContext,
    LinkDown,
    LinkError,
    Role,
    ShufflerDiagnostics,
    cursor_key,
    load_driver,
    parse_cursor,
)
from tablectl.drivers.api import ShoeDriver as Shoe
from tablectl.drivers.transport.base import TraceWriter

from tablectl.config import DeviceSection, TableConfig
from tablectl.control.protocol import (
    ShufflerCount,
    ShufflerCountRequest,
    ShufflerSelfTest,
    ShufflerSelfTestRequest,
    ShufflerTestRequest,
)
from tablectl.core import decks
from tablectl.core.events import (
    DealRequested,
    DealRequestFailed,
    DeckInPlay,
    DeckIntroduced,
    DeviceLinkReset,
    Event,
    ShoeCleared,
    ShoeFault,
    ShuffleRequestFailed,
    TableRules,
)
from tablectl.core.table import Rejected, TableState
from tablectl.service.recovery import PowerUpRecovery
from tablectl.service.waits import WaitWatch
from tablectl.store.journal import Store
from tablectl.util.backoff import Backoff

log = structlog.get_logger(__name__)
SHUFFLE_RETRY_MAX_S = 30.0  # a refused SHUFFLE is asked again, backing off up to this
DEAL_LINK_WAIT_S = 10.0  # a deal waits this long for the shoe's link before it fails


class DeviceHost(Protocol):
    """What the supervisor needs of the daemon it serves (service/daemon.py is one)."""

    @property
    def state(self) -> TableState | None:
        """The table as its last committed step left it."""
        ...

    @property
    def stopping(self) -> bool: ...

    def post(self, event: Event) -> None:
        """Queue an input from the table's own side (a refused shuffle, a failed deal)."""
        ...

    def post_report(self, report: DeviceReport) -> None:
        """Queue a device's report; `acknowledge` follows its commit."""
        ...

    def submit(
        self, event: Event, *, kv: dict[str, str] | None = None
    ) -> Awaitable[list[dict[str, Any]]]:
        """A command, journaled: the rows; raises Rejected."""
        ...

    def wall_clock_ms(self) -> int: ...


class DeviceSupervisor:
    """The table's devices: built, run, asked, acknowledged."""

    def __init__(
        self,
        config: TableConfig,
        rules: TableRules,
        host: DeviceHost,
        *,
        boot_id: str,
        shuffle_retry_s: float = 1.0,
    ) -> None:
        self._config = config
        self._rules = rules
        self._boot_id = boot_id
        self._host = host
        self.drivers: dict[str, DeviceDriver] = {}
        # The largest event id each device's driver declares (Driver.event_id_max), by role.
        self.event_id_max: dict[str, int] = {}
        self._traces: dict[str, TraceWriter] = {}
        self.shoe: Shoe | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._shuffle_asker: asyncio.Task[None] | None = None
        self._shuffle_wanted = asyncio.Event()  # wakes the asker from its backoff
        # The asker's backoff, reset whenever the core asks anew: one for the daemon's life
        # (each Backoff seeds a random.Random of its own, which is not free at every shuffle).
        self._shuffle_backoff = Backoff(initial_s=shuffle_retry_s, max_s=SHUFFLE_RETRY_MAX_S)
        self._shuffle_requests = 0  # shuffle requests from the core so far: a new one is news
        # What each device says first after this start settles a command in flight to it.
        self.recovery = PowerUpRecovery(host.post)
        # How long the table has waited for each device's command (service/waits.py).
        timeouts = {"shuffler": float(config.shuffler.stall_timeout_s)}
        if config.shoe is not None:
            timeouts["shoe"] = float(config.shoe.stall_timeout_s)
        self.waits = WaitWatch(timeouts)

    def open(self, store: Store, usb_backend: Any) -> None:
        """Each device's driver (found by name, tablectl.drivers.api), going on from the
        journal's cursor."""
        cfg = self._config
        spec = load_driver(cfg.shuffler.driver, "shuffler")
        self.event_id_max["shuffler"] = spec.event_id_max
        make_shuffler = spec.shuffler
        assert make_shuffler is not None  # load_driver checked it
        self.shuffler = make_shuffler(
            cfg.shuffler.settings, self._context("shuffler", cfg.shuffler, store, usb_backend)
        )
        self.drivers["shuffler"] = self.shuffler
        if cfg.shoe is not None:
            shoe_spec = load_driver(cfg.shoe.driver, "shoe")
            self.event_id_max["shoe"] = shoe_spec.event_id_max
            make_shoe = shoe_spec.shoe
            assert make_shoe is not None
            self.shoe = make_shoe(
                cfg.shoe.settings, self._context("shoe", cfg.shoe, store, usb_backend)
            )
            self.drivers["shoe"] = self.shoe
        self.recovery.watch(self.drivers)

    def _context(
        self, role: Role, section: DeviceSection, store: Store, usb_backend: Any
    ) -> DriverContext:
        return DriverContext(
            emit=self.post_report,
            cursor=parse_cursor(store.get(cursor_key(role))),
            trace=self._trace(role, section.trace_file),
            extras={"usb_backend": usb_backend},
        )

    def start(self, tasks: asyncio.TaskGroup) -> None:
        self._tasks = tasks
        for name, driver in self.drivers.items():
            tasks.create_task(driver.run(), name=name)

    def close(self) -> None:
        for trace in self._traces.values():
            trace.close()

    def _trace(self, device: str, path: Path | None) -> TraceWriter | None:
        if path is None:
            return None
        header = f"{device} {self._config.table.table_id} boot {self._boot_id}"
        trace = TraceWriter.open(path, header)
        self._traces[device] = trace
        return trace

    # --- reports in, acknowledgements out ---------------------------------------------------

    def post_report(self, report: DeviceReport) -> None:
        trace = self._traces.get(report.device)
        if trace is not None and not self._host.stopping:
            trace.input(report.input.TYPE + " " + report.input.model_dump_json())
        self._host.post_report(report)

    def acknowledge(self, report: DeviceReport) -> None:
        """The report is on disk: the device may forget it."""
        self.drivers[report.device].acknowledge(report)

    def health(self) -> dict[str, dict[str, Any]]:
        return {name: device.health() for name, device in self.drivers.items()}

    def stalls(self) -> list[Event]:
        """The waits that have become stalls now (service/waits.py), for the core."""
        state = self._host.state
        if state is None:
            return []
        return list(self.waits.check(state, self.health()))

    # --- commands ----------------------------------------------------------------------

    def check_command(self, event: Event) -> Event:
        """What only the devices can say about a command, refused before it is journaled;
        the command as it is journaled (a deal names the shoe's boot it goes to)."""
        shoe, state = self.shoe, self._host.state
        if shoe is None or state is None or state.shoe_out_of_order:
            return event
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
        if isinstance(event, DealRequested):
            # After a power cut, only the boot the deal went to can show it never dealt
            # (core/recovery.py).
            return event.model_copy(update={"shoe_boot_id": shoe.boot_id})
        return event

    async def reset_link(self, device: str, by: str) -> list[dict[str, Any]]:
        """A technician resets a device link stopped at refused events: the events the device
        holds are skipped (journaled as such, with who) and the link takes what follows."""
        driver = self.drivers.get(device)
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
        rows = await self._host.submit(reset, kv={cursor_key(device): f"{boot}:{last}"})
        driver.reset_to(boot, last)
        return rows

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

    # --- what the core asks ------------------------------------------------------------

    def want_shuffle(self) -> None:
        """The core asks for a deck (RequestShuffle): one asker asks until it is shuffled."""
        assert self._tasks is not None
        self._shuffle_requests += 1
        self._shuffle_wanted.set()
        if self._shuffle_asker is None or self._shuffle_asker.done():
            self._shuffle_asker = self._tasks.create_task(
                self._request_shuffle(), name="shuffle-request"
            )

    def deal(self, stacks: tuple[int, ...]) -> asyncio.Task[str | None]:
        """The core asks the shoe to deal (DealCards): why it did not, or None."""
        assert self._tasks is not None
        return self._tasks.create_task(self._request_deal(stacks), name="deal-request")

    def shuffled(self, opened: bool) -> None:
        """A shuffle completed: a shuffler that reports its deck introduces it."""
        if self._rules.deck is not None and self._tasks is not None:
            self._tasks.create_task(self._deck_from_shuffler(opened), name="shuffler-deck")

    async def _request_shuffle(self) -> None:
        """Ask the shuffler to shuffle while the core wants a deck, again and again (backing
        off) while it refuses; the core hears of a refusal once per reason, not per attempt.
        A device that fails or a link that drops never ends the daemon."""
        told: str | None = None
        backoff = self._shuffle_backoff

        def wanted() -> bool:
            state = self._host.state
            return state is not None and state.shuffle_requested and not self._host.stopping

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
                self.waits.taken("shuffler")
                return
            except LinkDown:
                pass  # it shows as a link fault; asked again once the link is back
            except (LinkError, OSError) as exc:
                why = exc.summary if isinstance(exc, LinkError) else str(exc)
                if why != told:
                    log.warning("shuffle request refused", error=why)
                    told = why
                    self._host.post(ShuffleRequestFailed(reason=why, retrying=True))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff.next_delay()):
                    await self._shuffle_wanted.wait()  # or sooner, when the core asks anew

    async def _request_deal(self, stacks: tuple[int, ...]) -> str | None:
        assert self.shoe is not None
        try:
            async with asyncio.timeout(DEAL_LINK_WAIT_S):
                await self.shoe.wait_link_up()
            await self.shoe.deal(stacks)
            self.waits.taken("shoe")
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
            self._host.post(DealRequestFailed(reason=why))
            return why

    async def _deck_from_shuffler(self, opened: bool) -> None:
        """A shuffler that reports the deck it shuffled (DECK) introduces a deck the table does
        not know (649a.3): the round's deck if the shuffle opened one, else the next deck."""
        deck_rules = self._rules.deck
        if deck_rules is None:
            return
        try:
            deck = await self.shuffler.deck_loaded()
        except LinkError as exc:
            log.warning("the shuffler's deck could not be read", error=str(exc))
            return
        state = self._host.state
        if deck is None or state is None:
            return
        if state.deck.find(deck[0]) is not None:
            if opened and deck[0] != state.deck.round_deck:
                # 649a.3(b)(3): the round opened on another deck than the one due.
                with contextlib.suppress(Rejected):
                    await self._host.submit(
                        DeckInPlay(deck_id=deck[0], source="shuffler", by="shuffler")
                    )
            return
        due = state.deck.next_deck(deck_rules)
        shuffled = state.deck.round_deck if opened else None if due is None else due.deck_id
        full = len(state.deck.decks) >= decks.decks_needed(deck_rules)
        try:
            introduced = DeckIntroduced(
                deck_id=deck[0],
                back=deck[1],
                at_ms=self._host.wall_clock_ms(),
                replaces=shuffled if full else None,
                source="shuffler",
                by="shuffler",
            )
            await self._host.submit(introduced)
        except (ValidationError, Rejected) as exc:
            log.warning("the shuffler's deck was not introduced", deck=deck, error=str(exc))
