"""The technician's walk tests: each seat's sensor and lamp, the lock-out button, the shoe.

While a test runs the core holds the table (no round opens: `SensorTestStarted`), and the
debounced inputs go to the test; the core hears them too, to keep the sensors' levels, but a
chip placed for the test is never a wager and nothing is refused. Each step reports what the
sensors saw and the coarsest edge resolution, and the test's result is journaled
(`gpio.test_ended`).

The shoe test has the shoe deal a few cards of a test deck outside any round: each card it
reads is reported to the technician (never journaled or published: the card order stays on
the table PC), with what went wrong (an unread, foreign or repeated card, a card face up, a
fault). The cards reach the core as they always do, outside a deal, so they are counted and
never part of a hand; a fault is a fault of the table's shoe like any other.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, Protocol

from tablectl.drivers.api import ShoeDriver as Shoe
from tablectl.drivers.gpio.table_io import SensorInput, TableGpio

from tablectl.config import TableConfig
from tablectl.control.protocol import (
    TestBeginRequest,
    TestEndRequest,
    TestRequest,
    TestSeatRequest,
    TestShoeRequest,
)
from tablectl.core.effects import Effect, Lamp
from tablectl.core.events import (
    CardRead,
    ChipSensed,
    Event,
    LockoutPressed,
    SensorTestEnded,
    SensorTestStarted,
    ShoeCard,
    ShoeDealCompleted,
    ShoeFault,
    ShoeStackDealt,
)
from tablectl.core.table import Rejected, TableState
from tablectl.service.dispatcher import StepObserver

ShoeReport = ShoeCard | ShoeStackDealt | ShoeDealCompleted | ShoeFault


class TableUnderTest(Protocol):
    """What a walk test reaches of a running table (the daemon is one): typed here so this
    module needs nothing of the daemon's, and the daemon nothing of this one."""

    @property
    def config(self) -> TableConfig: ...

    @property
    def gpio(self) -> TableGpio | None: ...

    @property
    def shoe(self) -> Shoe | None: ...

    @property
    def state(self) -> TableState | None: ...

    @property
    def observers(self) -> list[StepObserver]: ...

    async def submit(self, event: Event) -> list[dict[str, Any]]: ...


class WalkTest:
    def __init__(self, gpio: TableGpio, test: str) -> None:
        self.gpio = gpio
        self.test = test
        self.events: asyncio.Queue[SensorInput] = asyncio.Queue()
        self.passed: list[int] = []
        self.failed: list[int] = []
        gpio.coarsest_resolution_ns = 0
        gpio.test_listener = self.events.put_nowait

    def _resolution(self) -> int:
        return max(self.gpio.coarsest_resolution_ns, self.gpio.backend.info.resolution_ns)

    async def seat(self, seat: int, timeout_s: float) -> dict[str, Any]:
        """Wait for a chip on `seat`, light its lamp, wait for it to be lifted."""
        elsewhere: set[int] = set()
        result: dict[str, Any] = {"seat": seat, "passed": False}
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    event = await self.events.get()
                    if isinstance(event, ChipSensed) and event.present:
                        if event.seat == seat:
                            break
                        elsewhere.add(event.seat)
        except TimeoutError:
            seen = f"; chips seen on seats {sorted(elsewhere)} (wiring?)" if elsewhere else ""
            result["reason"] = f"no chip seen on seat {seat} in {timeout_s:g} s{seen}"
            self.failed.append(seat)
            return {**result, "resolution_ns": self._resolution()}
        self.gpio.set_lamp(seat, Lamp.ON)  # 649a.2(c)(1): the seat's device acknowledges it
        result.update(passed=True, since_ns=event.since_ns, lamp="on")
        try:
            async with asyncio.timeout(timeout_s):
                while not (
                    isinstance(event, ChipSensed) and event.seat == seat and not event.present
                ):
                    event = await self.events.get()
            result["lifted"] = True
        except TimeoutError:
            result["lifted"] = False
        self.gpio.set_lamp(seat, Lamp.OFF)
        if elsewhere:
            result["also_seen_on"] = sorted(elsewhere)
        self.passed.append(seat)
        return {**result, "resolution_ns": self._resolution()}

    async def lockout(self, timeout_s: float) -> dict[str, Any]:
        try:
            async with asyncio.timeout(timeout_s):
                while not isinstance(event := await self.events.get(), LockoutPressed):
                    pass
        except TimeoutError:
            self.failed.append(0)
            return {
                "passed": False,
                "reason": f"no press seen in {timeout_s:g} s",
                "resolution_ns": self._resolution(),
            }
        self.passed.append(0)
        return {"passed": True, "at_ns": event.at_ns, "resolution_ns": event.resolution_ns}

    async def shoe(self, table: TableUnderTest, cards: int, timeout_s: float) -> dict[str, Any]:
        """Have the shoe deal `cards` cards in one stack; report each card it read."""
        from tablectl.drivers.api import LinkError

        assert table.shoe is not None
        reports: asyncio.Queue[ShoeReport] = asyncio.Queue()

        def watch(event: Event, _state: object, _effects: list[Effect]) -> None:
            if isinstance(event, ShoeCard | ShoeStackDealt | ShoeDealCompleted | ShoeFault):
                reports.put_nowait(event)

        table.observers.append(watch)
        seen: list[str] = []
        result: dict[str, Any] = {"asked": cards, "cards": seen, "passed": False}
        problems: list[str] = []
        bad: set[int] = set()  # the cards (1 to N) not read cleanly
        try:
            async with asyncio.timeout(timeout_s):
                await table.shoe.wait_link_up()
                await table.shoe.deal((cards,))
                while True:
                    event = await reports.get()
                    if isinstance(event, ShoeFault):
                        problems.append(f"the shoe reported a fault: {event.code}")
                        result["fault"] = event.code
                        break
                    if isinstance(event, ShoeDealCompleted):
                        result["dealt"] = event.cards
                        break
                    if isinstance(event, ShoeCard):
                        seen.append(_card_text(event))
                        if event.read is not CardRead.READ:
                            problems.append(f"card {len(seen)}: {event.read.value}")
                            bad.add(len(seen))
                        elif seen.count(seen[-1]) > 1:
                            problems.append(f"card {len(seen)}: {seen[-1]} read twice")
                            bad.add(len(seen))
        except TimeoutError:
            problems.append(f"the shoe did not finish dealing in {timeout_s:g} s")
        except LinkError as exc:
            problems.append(f"the shoe refused to deal: {exc}")
        finally:
            table.observers.remove(watch)
        dealt = [c for c in seen if c != "face-up"]
        if not problems and len(dealt) != cards:
            problems.append(f"{len(dealt)} cards dealt, {cards} asked")
        result.update(passed=not problems, problems=problems)
        for i in range(1, len(seen) + 1):
            (self.failed if i in bad else self.passed).append(i)
        if problems and not bad:
            self.failed.append(0)  # the deal itself failed
        return result

    def close(self) -> None:
        self.gpio.test_listener = None


def _card_text(event: ShoeCard) -> str:
    if event.read is CardRead.READ and event.card is not None:
        return str(event.card)
    if event.read is CardRead.FACE_UP:
        return "face-up"
    return event.read.value  # unread, foreign


class TechnicianTests:
    """The walk test a technician runs on a table through the control socket (one at a time)."""

    def __init__(self, table: TableUnderTest) -> None:
        self.table = table
        self.running: WalkTest | None = None

    async def step(self, request: TestRequest, by: str) -> dict[str, Any]:
        """One step of a walk test, asked for on the control socket."""
        table = self.table
        assert table.gpio is not None
        walk = self.running
        match request:
            case TestBeginRequest(test=test):
                if walk is not None:
                    raise Rejected(f"a {walk.test} test is already running")
                if test == "shoe":
                    _can_test_shoe(table)
                # The inputs go to the test from the moment the core holds the table.
                walk = self.running = WalkTest(table.gpio, test)
                try:
                    await table.submit(SensorTestStarted(test=test, by=by))
                except Rejected:
                    walk.close()
                    self.running = None
                    raise
                return {"test": test, "gpio": table.gpio.status()}
            case TestEndRequest():
                if walk is None:
                    raise Rejected("no walk test is running")
                walk.close()
                self.running = None
                rows = await table.submit(
                    SensorTestEnded(
                        test="shoe" if walk.test == "shoe" else _gpio_test(walk.test),
                        passed=tuple(walk.passed),
                        failed=tuple(walk.failed),
                        resolution_ns=walk._resolution(),
                        by=by,
                    )
                )
                return {"journaled": rows}
        if walk is None:
            raise Rejected("no walk test is running: begin one first")
        if isinstance(request, TestShoeRequest):
            if walk.test != "shoe":
                raise Rejected(f"a {walk.test} test is running, not a shoe test")
            _can_test_shoe(table)
            return await walk.shoe(table, request.cards, request.timeout_s)
        if walk.test == "shoe":
            raise Rejected("a shoe test is running: test-shoe or test-end")
        if isinstance(request, TestSeatRequest):
            seats = table.config.table.seats
            if not 1 <= request.seat <= seats:
                raise Rejected(f"seat {request.seat} does not exist (1..{seats})")
            return await walk.seat(request.seat, request.timeout_s)
        return await walk.lockout(request.timeout_s)


def _gpio_test(test: str) -> Literal["sensors", "lockout"]:
    return "lockout" if test == "lockout" else "sensors"


def _can_test_shoe(table: TableUnderTest) -> None:
    if table.shoe is None:
        raise Rejected("this table has no automated dealing shoe ([shoe] in the config)")
    state = table.state
    if state is not None and state.deal is not None and not state.deal.complete:
        raise Rejected(f"round {state.round_id}: the shoe is dealing; settle or void it first")
