"""The conformance kit: each scenario runs a real daemon (in this process, on a scratch data
directory) on the driver under test and its simulator, misbehaves through the simulator's
knobs, and checks what the table does: no round on an unverified deck, the daemon up, the
fault shown with the command (or the remedy) that clears it.

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
from typing import Literal

from tablectl.drivers.api import (
    API_VERSION,
    SHUFFLER_COMMANDS,
    Driver,
    LinkError,
    ShufflerDiagnostics,
    ShufflerDriver,
    ShufflerSimulator,
    load_driver,
)
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import TableConfig
from tablectl.core.table import Phase, TableState
from tablectl.service.api import Daemon
from tablectl.status import FaultView, Status

GUARD_S = 30.0  # a scenario that hangs fails here; not a timing claim

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

    def status(self) -> Status:
        return self.daemon.status()

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

    def fault(self, what: str) -> FaultView | None:
        return next((f for f in self.status().faults if f.what == what), None)

    async def no_round_and_a_fault(self, what: str) -> FaultView:
        """The fault `what` shows, with what clears it, and no round opens on the deck."""
        await self.until(f"{what} shown", lambda: self.fault(what) is not None)
        fault = self.fault(what)
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
Arrange = Callable[[ShufflerSimulator], None]


@dataclass(frozen=True)
class Scenario:
    name: str
    expected: str  # the table's behaviour, in the words of the report
    check: Check
    before: Arrange | None = None  # knobs set before the daemon starts


SCENARIOS: list[Scenario] = []


def scenario(name: str, expected: str, before: Arrange | None = None) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        SCENARIOS.append(Scenario(name, expected, check, before))
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


Outcome = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class Result:
    scenario: str
    expected: str
    outcome: Outcome
    detail: str = ""


def _simulator(driver: Driver) -> ShufflerSimulator:
    if driver.simulator is None:
        raise LookupError(f"driver {driver.name!r} names no simulator (Driver.simulator)")
    module, _, attr = driver.simulator.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    sim: ShufflerSimulator = factory()
    return sim


def _config(name: str, settings: dict[str, object], data_dir: Path) -> TableConfig:
    raw = tomllib.loads(_TABLE)
    raw["shuffler"] = {"driver": name, "decks": 1, **settings}
    raw["storage"] = {"data_dir": str(data_dir), "control_socket": str(data_dir / "c.sock")}
    # A broker that is not there: the relay keeps trying, nothing waits on it.
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        raw["mqtt"]["port"] = unused.getsockname()[1]
    return TableConfig.model_validate(raw)


@contextlib.asynccontextmanager
async def running(name: str, before: Arrange | None = None) -> AsyncIterator[Table]:
    """A daemon on driver `name` and its simulator, on a scratch data directory."""
    driver = load_driver(name, "shuffler")
    sim = _simulator(driver)
    if before is not None:
        before(sim)
    settings = await sim.start()
    with tempfile.TemporaryDirectory(prefix="tablectl-kit-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        inputs = SimulatedTableInputs(6)
        daemon = Daemon(_config(name, settings, data_dir), gpio_backend=inputs.backend())
        task = asyncio.create_task(daemon.run(), name="daemon-under-conformance")
        try:
            async with asyncio.timeout(GUARD_S):
                await daemon.ready.wait()
            table = Table(daemon, sim, data_dir, task)
            yield table
            table.daemon_up()
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):  # its end is judged above, not here
                await task
            sim.close()


async def run_scenario(name: str, scenario: Scenario) -> Result:
    driver = load_driver(name, "shuffler")
    if scenario.name in driver.unsupported:
        return Result(scenario.name, scenario.expected, "skip", driver.unsupported[scenario.name])
    try:
        async with running(name, scenario.before) as table:
            await scenario.check(table)
    except ScenarioFailed as exc:
        return Result(scenario.name, scenario.expected, "fail", str(exc))
    except Exception as exc:  # noqa: BLE001 -- a driver's error is the scenario's failure
        return Result(scenario.name, scenario.expected, "fail", f"raised {exc!r}")
    return Result(scenario.name, scenario.expected, "pass")


async def run_all(name: str, only: list[str] | None = None) -> list[Result]:
    return [await run_scenario(name, s) for s in SCENARIOS if only is None or s.name in only]


def report(name: str, results: list[Result]) -> str:
    """The markdown table a device maker attaches to a submission."""
    driver = load_driver(name, "shuffler")
    passed = sum(r.outcome == "pass" for r in results)
    lines = [
        f"# tablectl driver conformance: `{name}` (shuffler)",
        "",
        f"{driver.description}. Driver API {driver.api_version[0]}.{driver.api_version[1]} "
        f"(tablectl's: {API_VERSION[0]}.{API_VERSION[1]}). {passed} of {len(results)} passed.",
        "",
        "| scenario | the table's expected behaviour | result |",
        "| --- | --- | --- |",
    ]
    for r in results:
        shown = {"pass": "pass", "fail": f"**FAIL**: {r.detail}", "skip": f"skipped: {r.detail}"}
        lines.append(f"| {r.scenario} | {r.expected} | {shown[r.outcome]} |")
    return "\n".join(lines) + "\n"
