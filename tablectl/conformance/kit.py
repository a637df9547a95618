"""The conformance kit: each scenario runs a real daemon (in this process, on a scratch data
directory) on the driver under test and its simulator, misbehaves through the simulator's
knobs, and checks what the table does: no round on an unverified deck, the daemon up, the
fault shown with the command (or the remedy) that clears it.

Scenarios are by role. The shuffler's run a daemon whose shuffler is the driver under test;
the shoe's (`shoe-*`) a daemon dealing from an automated shoe (649a.10) that is the driver
under test, beside the reference shuffler and its simulator (a shoe needs a counted deck to
deal from). A driver that drives no shoe has no shoe scenarios: they do not apply to it.

A driver declares the scenarios it cannot take part in (`Driver.unsupported`, with why, as a
SQLAlchemy dialect's requirements.py does); only those are skipped, by name. The report is a
markdown table a device maker can attach to a submission (`tablectl test driver NAME`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import socket
import tempfile
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tablectl.drivers.api import (
    API_VERSION,
    ROLES,
    SHOE_COMMANDS,
    SHUFFLER_COMMANDS,
    Driver,
    LinkError,
    Role,
    ShoeDriver,
    ShoeSimulator,
    ShufflerDiagnostics,
    ShufflerDriver,
    ShufflerSimulator,
    load_driver,
)
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import TableConfig
from tablectl.control import client as control
from tablectl.core.table import Phase, TableState
from tablectl.service.api import Daemon
from tablectl.status import FaultView, Status

GUARD_S = 30.0  # a scenario that hangs fails here; not a timing claim
SEATS = (2, 5)  # the seats that wager in a shoe scenario's round
SHOE_VOID_RULE = "649a.13(f)"  # a shoe that jams, stops or fails to deal: void, wagers back
# The table's shuffler in a shoe scenario (a shoe deals only a deck counted after a shuffle).
TABLE_SHUFFLER = "reference"

_TABLE = """
[table]
site_id = "conformance"
table_id = "kit-01"
seats = 6
[game]
name = "three-card-poker"
dealing = "hand"
[game.progressive]
wager = "1.00"
paytable = "A"
rate_of_progression_percent = "14.5"
initial_amount = "1000.00"
reset_amount = "1000.00"
[gpio]
backend = "mock"
seat_sensor_pins = [5, 6, 13, 19, 26, 21]
seat_light_pins = [17, 27, 22, 23, 24, 25]
lockout_pin = 16
[mqtt]
host = "127.0.0.1"
port = 1
backends = ["pgs"]
"""


class ScenarioFailed(AssertionError):
    """The table did not behave as the scenario expects; the message says how."""


@dataclass
class Table:
    """A daemon on the driver under test and its simulator."""

    daemon: Daemon
    sim: ShufflerSimulator
    data_dir: Path
    task: asyncio.Task[None]
    inputs: SimulatedTableInputs
    shoe_sim: ShoeSimulator | None = None  # a shoe scenario's simulator

    def daemon_up(self) -> None:
        """Raise ScenarioFailed if the daemon has ended (a driver's error must not end it)."""
        if self.task.done():
            error = None if self.task.cancelled() else self.task.exception()
            raise ScenarioFailed(f"the daemon ended: {error!r}")

    @property
    def state(self) -> TableState:
        assert self.daemon.state is not None
        return self.daemon.state

    @property
    def driver(self) -> ShufflerDriver:
        return self.daemon.shuffler

    @property
    def shoe(self) -> ShoeDriver:
        shoe = self.daemon.shoe
        if shoe is None:
            raise ScenarioFailed("the table has no shoe")
        return shoe

    @property
    def shoe_device(self) -> ShoeSimulator:
        assert self.shoe_sim is not None
        return self.shoe_sim

    def status(self) -> Status:
        return self.daemon.status()

    async def locked_with_wagers(self) -> None:
        """A round with wagers at SEATS, locked out and counted: ready to deal."""
        await self.a_round_opens()
        for seat in SEATS:
            self.inputs.place_chip(seat)
        await self.until("the wagers seen", lambda: set(self.state.wagers) == set(SEATS))
        self.inputs.press_lockout()
        await self.until(
            "the round locked and counted",
            lambda: self.state.phase is Phase.LOCKED and self.state.counted,
        )

    async def deal(self) -> dict[str, Any]:
        """`tablectl dealer deal`, on the control socket as a dealer gives it."""
        sock = self.daemon.config.storage.socket_path
        return await asyncio.to_thread(control.call, sock, {"cmd": "deal", "by": "K1"})

    async def dealt(self) -> None:
        await self.until(
            "the deal complete", lambda: self.state.deal is not None and self.state.deal.complete
        )

    def rows(self, type_: str) -> list[dict[str, Any]]:
        store = self.daemon.store
        assert store is not None
        return [row.data for row in store.rows_after(0, limit=1_000_000) if row.type == type_]

    async def until(self, what: str, predicate: Callable[[], bool]) -> None:
        try:
            async with asyncio.timeout(GUARD_S):
                while True:
                    self.daemon_up()
                    if predicate():
                        return
                    await asyncio.sleep(0.02)
        except TimeoutError:
            raise ScenarioFailed(f"never {what}; faults: {self.faults_said()}") from None

    def faults_said(self) -> str:
        return "; ".join(f"{f.what}: {f.command or f.remedy}" for f in self.status().faults)

    async def a_round_opens(self) -> None:
        await self.until(
            "a round open on a counted deck", lambda: self.state.phase is Phase.BETTING
        )

    def fault(self, what: str, device: str | None = None) -> FaultView | None:
        return next(
            (
                f
                for f in self.status().faults
                if f.what == what and (device is None or f.device == device)
            ),
            None,
        )

    async def no_round_and_a_fault(self, what: str, device: str | None = None) -> FaultView:
        """The fault `what` shows, with what clears it, and no round opens on the deck."""
        await self.until(f"{what} shown", lambda: self.fault(what, device) is not None)
        fault = self.fault(what, device)
        assert fault is not None
        if self.state.phase is Phase.BETTING:
            raise ScenarioFailed(f"a round opened although {fault.what}")
        if not (fault.command or fault.remedy):
            raise ScenarioFailed(f"{fault.what} is shown with nothing that clears it")
        return fault

    def inputs_of(self, type_: str) -> int:
        store = self.daemon.store
        assert store is not None
        return sum(1 for row in store.inputs() if row.type == type_)


Check = Callable[[Table], Awaitable[None]]
# Knobs set before the daemon starts, on the simulator of the role under test (a
# ShufflerSimulator or a ShoeSimulator: the scenario's role says which).
Arrange = Callable[[Any], None]


@dataclass(frozen=True)
class Scenario:
    name: str
    expected: str  # the table's behaviour, in the words of the report
    check: Check
    before: Arrange | None = None  # knobs set before the daemon starts
    role: Role = "shuffler"  # the role whose driver is under test


SCENARIOS: list[Scenario] = []


def scenario(
    name: str, expected: str, before: Arrange | None = None, role: Role = "shuffler"
) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        SCENARIOS.append(Scenario(name, expected, check, before, role))
        return check

    return register


@scenario("count-52", "a full deck counted after the shuffle: a round opens")
async def _count_52(t: Table) -> None:
    await t.a_round_opens()
    if t.inputs_of("shuffle_completed") != 1:
        raise ScenarioFailed(f"{t.inputs_of('shuffle_completed')} completions journaled, not 1")


def _miscount(count: int) -> Check:
    async def check(t: Table) -> None:
        await t.no_round_and_a_fault("deck-miscount")
        if t.inputs_of("shuffle_completed") != 1:
            raise ScenarioFailed(f"the count of {count} was not journaled once")

    return check


def _counting(count: int) -> Arrange:
    def arrange(sim: ShufflerSimulator) -> None:
        sim.next_counts([count])

    return arrange


for _count in (51, 53):
    scenario(
        f"count-{_count}",
        f"a count of {_count}: no round opens; deck-miscount shown with what clears it",
        before=_counting(_count),
    )(_miscount(_count))


async def _jammed(t: Table) -> None:
    fault = await t.no_round_and_a_fault("shuffler-fault")
    if "jam" not in fault.cause:
        raise ScenarioFailed(f"shuffler-fault shown without its cause: {fault.cause}")


scenario(
    "jam-by-event",
    "a jam reported as an event: no round opens; shuffler-fault shown with its command",
    before=lambda sim: sim.jam_next(by_event=True),
)(_jammed)
scenario(
    "jam-by-status-only",
    "a jam shown only in the device's status: no round opens; shuffler-fault shown",
    before=lambda sim: sim.jam_next(by_event=False),
)(_jammed)


@scenario(
    "event-id-reused",
    "an event id reported again with another count: not taken as a replay; a fault shown",
)
async def _reused(t: Table) -> None:
    await t.a_round_opens()
    await t.until("the shuffler's events all acknowledged", t.sim.idle)
    t.sim.restate_last()
    await t.until("the conflict journaled", lambda: t.inputs_of("device_report_conflict") >= 1)
    if t.inputs_of("shuffle_completed") != 1:
        raise ScenarioFailed("the restated completion was taken as a new one")


@scenario(
    "reboot-new-boot",
    "a reboot with a new boot id: journaled as a reboot; the link comes back; the daemon up",
)
async def _reboot(t: Table) -> None:
    await t.a_round_opens()
    boot = t.driver.boot_id
    t.sim.reboot()
    await t.until("the reboot journaled", lambda: t.inputs_of("shuffler_rebooted") == 1)
    await t.until("the link back", lambda: t.driver.link_up and t.driver.boot_id != boot)


@scenario(
    "reboot-same-boot",
    "a restart keeping its boot id (ids from 1 again): no event taken twice, no deck made "
    "ready by it; the daemon up",
)
async def _reboot_same(t: Table) -> None:
    await t.a_round_opens()
    await t.until("the shuffler's events all acknowledged", t.sim.idle)
    completions = t.inputs_of("shuffle_completed")
    t.sim.reboot(keep_boot_id=True)
    await t.driver.wait_link_up()
    with contextlib.suppress(LinkError):
        await t.driver.shuffle()  # a shuffle the table did not ask for: ids 1, 2 again
    await t.until("the device at rest", t.sim.idle)
    taken = t.inputs_of("shuffle_completed") - completions
    if taken > 1:
        raise ScenarioFailed(f"{taken} completions taken from one shuffle")


@scenario(
    "seq-wrap",
    "the link's sequence number wraps at its maximum: the exchange goes on, a round opens",
)
async def _seq_wrap(t: Table) -> None:
    t.sim.wind_seq(t.driver)
    await t.a_round_opens()
    await t.until("polls past the wrap", lambda: t.driver.health().get("requests", 0) > 12)
    if not t.driver.link_up:
        raise ScenarioFailed("the link went down at the wrap")


def _closed_under(command: str) -> Check:
    async def check(t: Table) -> None:
        if command == "count":
            await t.a_round_opens()
            driver = t.driver
            if not isinstance(driver, ShufflerDiagnostics):
                raise ScenarioFailed("no count to close the link under (declare it unsupported)")
            t.sim.close_on("count")
            with contextlib.suppress(LinkError):  # the vocabulary: LinkDown, never an OSError
                await driver.count_deck()
            await t.until("the link back", lambda: t.driver.link_up)
            return
        await t.a_round_opens()
        if t.inputs_of("shuffle_completed") < 1:
            raise ScenarioFailed("a round opened with no completion journaled")

    return check


def _closing(command: str) -> Arrange:
    def arrange(sim: ShufflerSimulator) -> None:
        sim.close_on(command)

    return arrange


for _command in SHUFFLER_COMMANDS:
    scenario(
        f"link-closed-during-{_command}",
        f"the connection closes under {_command.upper()}: the daemon stays up, the link comes "
        "back, the shuffle is heard once and the table plays on",
        before=None if _command == "count" else _closing(_command),
    )(_closed_under(_command))


@scenario(
    "silent-device",
    "the device stops answering: link-down shown (no round on a deck it did not count); "
    "it answers again: the fault clears by itself",
)
async def _silent(t: Table) -> None:
    await t.a_round_opens()
    t.sim.silent(True)
    await t.until("link-down shown", lambda: t.fault("link-down") is not None)
    t.sim.silent(False)
    await t.until(
        "the link back and its fault gone",
        lambda: t.driver.link_up and t.fault("link-down") is None,
    )


@scenario(
    "garbage-frames",
    "noise before every answer: dropped and counted; the deck is counted, a round opens",
    before=lambda sim: sim.garbage(True),
)
async def _garbage(t: Table) -> None:
    await t.a_round_opens()


@scenario(
    "swapped-device",
    "another unit (another serial number) in its place: device-swap shown with the command "
    "that accepts it; no round until then",
)
async def _swapped(t: Table) -> None:
    await t.a_round_opens()
    t.sim.swap("SWAPPED-0002")
    await t.until("device-swap shown", lambda: t.fault("device-swap") is not None)
    fault = t.fault("device-swap")
    if fault is None or not fault.command:
        raise ScenarioFailed("device-swap shown with no command that accepts the unit")


# --- the shoe's scenarios ---------------------------------------------------------------------
# The hostile shoe of tests/test_hostile_devices.py and tests/test_device_faults.py, through
# any shoe driver: each knob is the ShoeSimulator's (tablectl.drivers.api).


def shoe_scenario(
    name: str, expected: str, before: Arrange | None = None
) -> Callable[[Check], Check]:
    return scenario(f"shoe-{name}", expected, before, role="shoe")


@shoe_scenario(
    "deal-and-read",
    "the shoe deals the round's plan and reads every card: the hands are formed from its "
    "reads, each card journaled once; the deal completes",
)
async def _shoe_deal(t: Table) -> None:
    await t.locked_with_wagers()
    reply = await t.deal()
    if not reply.get("ok"):
        raise ScenarioFailed(f"the deal was refused: {reply}")
    await t.dealt()
    deal = t.state.deal
    assert deal is not None
    if t.inputs_of("shoe_card") != len(deal.cards):
        raise ScenarioFailed(
            f"{t.inputs_of('shoe_card')} card reads journaled for {len(deal.cards)} cards"
        )
    if len(set(deal.cards)) != len(deal.cards):
        raise ScenarioFailed("a card was taken twice")


async def _voided(t: Table, cause: str) -> None:
    """The round is void with every wager returned (649a.13(f)); the shoe's fault is shown
    with the command that clears it; no round opens until it is cleared."""
    await t.locked_with_wagers()
    await t.deal()  # taken; the shoe fails under it
    fault = await t.no_round_and_a_fault("shoe-fault", device="shoe")
    if cause not in fault.cause:
        raise ScenarioFailed(f"shoe-fault shown without its cause ({cause}): {fault.cause}")
    if not fault.command or "clear-shoe" not in fault.command:
        raise ScenarioFailed(f"shoe-fault shown without clear-shoe: {fault.command}")
    await t.until("the round void", lambda: bool(t.rows("round.voided")))
    voided = t.rows("round.voided")[-1]
    if voided.get("rule") != SHOE_VOID_RULE or voided.get("wagers_returned") != list(SEATS):
        raise ScenarioFailed(f"not void with every wager returned ({SHOE_VOID_RULE}): {voided}")
    if t.state.phase is Phase.BETTING:
        raise ScenarioFailed("a round opened while the shoe's fault stands")


def _shoe_jammed(*, by_event: bool) -> Check:
    async def check(t: Table) -> None:
        await _voided(t, "jam")
        # A fault shown only in STATUS is told as one (ShoeFault.from_status), not invented
        # as an event the shoe never sent; one it sent as an event is the event.
        store = t.daemon.store
        assert store is not None
        told = [row.data for row in store.inputs() if row.type == "shoe_fault"]
        if not told or bool(told[0].get("from_status")) == by_event:
            said = "an event" if by_event else "its status only"
            raise ScenarioFailed(f"a jam the shoe showed by {said} was journaled as {told}")

    return check


shoe_scenario(
    "jam-by-event",
    f"the shoe jams mid-deal and says so: the round void, every wager returned "
    f"({SHOE_VOID_RULE}); shoe-fault shown with clear-shoe; no round until it is cleared",
    before=lambda sim: sim.jam_next(by_event=True),
)(_shoe_jammed(by_event=True))
shoe_scenario(
    "jam-by-status-only",
    f"the shoe jams mid-deal, shown only in its status: the round void, every wager returned "
    f"({SHOE_VOID_RULE}); shoe-fault shown with clear-shoe",
    before=lambda sim: sim.jam_next(by_event=False),
)(_shoe_jammed(by_event=False))


@shoe_scenario(
    "failure-to-deal",
    f"the shoe stops a card short and says the deal is complete: the round void, every wager "
    f"returned ({SHOE_VOID_RULE}); shoe-fault shown with clear-shoe",
    before=lambda sim: sim.fail_to_deal_next(),
)
async def _shoe_short(t: Table) -> None:
    await _voided(t, "fail")


@shoe_scenario(
    "unread-card",
    f"a card dealt that the shoe could not read: no hand formed on a guess; the round void, "
    f"every wager returned ({SHOE_VOID_RULE}); shoe-fault shown with clear-shoe",
    before=lambda sim: sim.unread_next(),
)
async def _shoe_unread(t: Table) -> None:
    await _voided(t, "read")


@shoe_scenario(
    "event-id-reused",
    "an event id reported again saying something else: not taken as a replay; the conflict "
    "is journaled, no card taken twice",
)
async def _shoe_reused(t: Table) -> None:
    await t.locked_with_wagers()
    await t.deal()
    await t.dealt()
    await t.until("the shoe's events all acknowledged", t.shoe_device.idle)
    cards = t.inputs_of("shoe_card")
    t.shoe_device.restate_last()
    await t.until("the conflict journaled", lambda: t.inputs_of("device_report_conflict") >= 1)
    if t.inputs_of("shoe_card") != cards or t.inputs_of("shoe_deal_completed") != 1:
        raise ScenarioFailed("the restated event was taken as a new one")


async def _shoe_link_up(t: Table) -> None:
    await t.until("the shoe's link up", lambda: t.shoe.link_up and t.shoe.boot_id is not None)


@shoe_scenario(
    "reboot-new-boot",
    "the shoe reboots with a new boot id: journaled as a reboot; the link comes back; the "
    "daemon up",
)
async def _shoe_reboot(t: Table) -> None:
    await _shoe_link_up(t)
    boot = t.shoe.boot_id
    t.shoe_device.reboot()
    await t.until("the reboot journaled", lambda: t.inputs_of("shoe_rebooted") == 1)
    await t.until("the link back", lambda: t.shoe.link_up and t.shoe.boot_id != boot)


@shoe_scenario(
    "reboot-same-boot",
    "a restart keeping its boot id (ids from 1 again): no card taken twice; the daemon up",
)
async def _shoe_reboot_same(t: Table) -> None:
    await t.locked_with_wagers()
    await t.deal()
    await t.dealt()
    await t.until("the shoe's events all acknowledged", t.shoe_device.idle)
    cards = t.inputs_of("shoe_card")
    t.shoe_device.reboot(keep_boot_id=True)
    await t.shoe.wait_link_up()
    with contextlib.suppress(LinkError):
        await t.shoe.deal((3,))  # a deal the table did not ask for: ids 1, 2, ... again
    await t.until("the shoe at rest", t.shoe_device.idle)
    if t.inputs_of("shoe_card") - cards > 3:
        raise ScenarioFailed(f"{t.inputs_of('shoe_card') - cards} cards taken from a deal of 3")


def _shoe_closed_under(command: str) -> Check:
    async def check(t: Table) -> None:
        await t.locked_with_wagers()
        if command == "deal":
            t.shoe_device.close_on("deal")
        with contextlib.suppress(control.ControlClientError):
            await t.deal()
        if command != "deal":
            await t.dealt()
        else:  # dealt once, or refused with what to do: never two deals, never a dead daemon
            await t.until(
                "the deal complete or its failure shown",
                lambda: (
                    (t.state.deal is not None and t.state.deal.complete)
                    or any(
                        f.device == "shoe" and (f.command or f.remedy) for f in t.status().faults
                    )
                    or t.state.deal_refused is not None
                ),
            )
        await t.until("the shoe's link back", lambda: t.shoe.link_up)
        if t.inputs_of("shoe_deal_completed") > 1:
            raise ScenarioFailed("one deal completed twice")

    return check


for _command in SHOE_COMMANDS:
    shoe_scenario(
        f"link-closed-during-{_command}",
        f"the connection closes under {_command.upper()}: the daemon stays up, the link comes "
        "back; the deal is dealt once (or its failure shown with what clears it)",
        before=None if _command == "deal" else _closing(_command),
    )(_shoe_closed_under(_command))


@shoe_scenario(
    "silent-device",
    "the shoe stops answering: link-down shown for the shoe; it answers again: the fault "
    "clears by itself",
)
async def _shoe_silent(t: Table) -> None:
    await _shoe_link_up(t)
    t.shoe_device.silent(True)
    await t.until("link-down shown", lambda: t.fault("link-down", "shoe") is not None)
    t.shoe_device.silent(False)
    await t.until(
        "the link back and its fault gone",
        lambda: t.shoe.link_up and t.fault("link-down", "shoe") is None,
    )


@shoe_scenario(
    "garbage-frames",
    "noise before every answer: dropped; the deal is dealt and read, complete",
    before=lambda sim: sim.garbage(True),
)
async def _shoe_garbage(t: Table) -> None:
    await t.locked_with_wagers()
    await t.deal()
    await t.dealt()


@shoe_scenario(
    "swapped-device",
    "another shoe (another serial number) in its place: device-swap shown with the command "
    "that accepts it",
)
async def _shoe_swapped(t: Table) -> None:
    await _shoe_link_up(t)
    await t.until("the shoe identified", lambda: t.shoe.health().get("serial_number") is not None)
    t.shoe_device.swap("SWAPPED-SHOE-0002")
    await t.until("device-swap shown", lambda: t.fault("device-swap", "shoe") is not None)
    fault = t.fault("device-swap", "shoe")
    if fault is None or not fault.command:
        raise ScenarioFailed("device-swap shown with no command that accepts the shoe")


Outcome = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class Result:
    scenario: str
    expected: str
    outcome: Outcome
    detail: str = ""
    role: Role = "shuffler"


def _made(driver: Driver, where: str | None, field: str) -> Any:
    """The simulator a driver names (\"module:callable\"), made."""
    if where is None:
        raise LookupError(f"driver {driver.name!r} names no simulator (Driver.{field})")
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr)()


def _simulator(driver: Driver) -> ShufflerSimulator:
    sim: ShufflerSimulator = _made(driver, driver.simulator, "simulator")
    return sim


def _shoe_simulator(driver: Driver) -> ShoeSimulator:
    sim: ShoeSimulator = _made(driver, driver.shoe_simulator, "shoe_simulator")
    return sim


def _config(
    shuffler: tuple[str, dict[str, object]],
    data_dir: Path,
    shoe: tuple[str, dict[str, object]] | None = None,
) -> TableConfig:
    raw = tomllib.loads(_TABLE)
    raw["shuffler"] = {"driver": shuffler[0], "decks": 1, **shuffler[1]}
    if shoe is not None:  # the hands are formed from what the shoe reads (649a.10)
        raw["game"]["dealing"] = "automated-shoe"
        raw["shoe"] = {"driver": shoe[0], **shoe[1]}
    raw["storage"] = {"data_dir": str(data_dir), "control_socket": str(data_dir / "c.sock")}
    # A broker that is not there: the relay keeps trying, nothing waits on it.
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        raw["mqtt"]["port"] = unused.getsockname()[1]
    return TableConfig.model_validate(raw)


@contextlib.asynccontextmanager
async def running(
    name: str, before: Arrange | None = None, role: Role = "shuffler"
) -> AsyncIterator[Table]:
    """A daemon on driver `name` (for `role`) and its simulator, on a scratch data directory;
    a shoe's beside the reference shuffler and its simulator."""
    shoe_sim: ShoeSimulator | None = None
    if role == "shoe":
        shoe_sim = _shoe_simulator(load_driver(name, "shoe"))
        sim = _simulator(load_driver(TABLE_SHUFFLER, "shuffler"))
        if before is not None:
            before(shoe_sim)
    else:
        sim = _simulator(load_driver(name, "shuffler"))
        if before is not None:
            before(sim)
    try:
        shuffler_settings = await sim.start()
        shoe = None if shoe_sim is None else (name, await shoe_sim.start())
        with tempfile.TemporaryDirectory(prefix="tablectl-kit-") as tmp:
            data_dir = Path(tmp) / "data"
            data_dir.mkdir()
            inputs = SimulatedTableInputs(6)
            shuffler = (TABLE_SHUFFLER if role == "shoe" else name, shuffler_settings)
            config = _config(shuffler, data_dir, shoe)
            daemon = Daemon(config, gpio_backend=inputs.backend())
            task = asyncio.create_task(daemon.run(), name="daemon-under-conformance")
            try:
                async with asyncio.timeout(GUARD_S):
                    await daemon.ready.wait()
                table = Table(daemon, sim, data_dir, task, inputs, shoe_sim)
                yield table
                table.daemon_up()
            finally:
                task.cancel()
                with contextlib.suppress(BaseException):  # its end is judged above, not here
                    await task
    finally:
        sim.close()
        if shoe_sim is not None:
            shoe_sim.close()


def applies(driver: Driver, scenario: Scenario) -> bool:
    """A scenario applies to a driver that fills its role (a shuffler-only driver has no
    shoe scenarios: not skipped, not run)."""
    return driver.factory(scenario.role) is not None


async def run_scenario(name: str, scenario: Scenario) -> Result:
    driver = load_driver(name, scenario.role)
    if scenario.name in driver.unsupported:
        return Result(
            scenario.name,
            scenario.expected,
            "skip",
            driver.unsupported[scenario.name],
            scenario.role,
        )
    try:
        async with running(name, scenario.before, scenario.role) as table:
            await scenario.check(table)
    except ScenarioFailed as exc:
        return Result(scenario.name, scenario.expected, "fail", str(exc), scenario.role)
    except Exception as exc:  # noqa: BLE001 -- a driver's error is the scenario's failure
        return Result(scenario.name, scenario.expected, "fail", f"raised {exc!r}", scenario.role)
    return Result(scenario.name, scenario.expected, "pass", role=scenario.role)


def driver_named(name: str) -> Driver:
    """The driver `name`, whatever roles it fills (UnknownDriver if it is not installed)."""
    for role in ROLES:
        with contextlib.suppress(LookupError):
            return load_driver(name, role)
    return load_driver(name, ROLES[0])  # raises, naming the drivers there are


async def run_all(name: str, only: list[str] | None = None) -> list[Result]:
    driver = driver_named(name)
    return [
        await run_scenario(name, s)
        for s in SCENARIOS
        if applies(driver, s) and (only is None or s.name in only)
    ]


def report(name: str, results: list[Result]) -> str:
    """The markdown table a device maker attaches to a submission: every scenario of every
    role the driver fills."""
    driver = driver_named(name)
    roles = driver.roles()
    passed = sum(r.outcome == "pass" for r in results)
    absent = [r for r in ROLES if r not in roles]
    lines = [
        f"# tablectl driver conformance: `{name}` ({', '.join(roles)})",
        "",
        f"{driver.description}. Driver API {driver.api_version[0]}.{driver.api_version[1]} "
        f"(tablectl's: {API_VERSION[0]}.{API_VERSION[1]}). {passed} of {len(results)} passed."
        + "".join(f" It drives no {r}: the {r}'s scenarios do not apply." for r in absent),
        "",
        "| role | scenario | the table's expected behaviour | result |",
        "| --- | --- | --- | --- |",
    ]
    for r in results:
        shown = {"pass": "pass", "fail": f"**FAIL**: {r.detail}", "skip": f"skipped: {r.detail}"}
        lines.append(f"| {r.role} | {r.scenario} | {r.expected} | {shown[r.outcome]} |")
    return "\n".join(lines) + "\n"
