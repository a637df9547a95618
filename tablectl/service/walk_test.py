"""The technician's walk tests: each seat's sensor and lamp, and the lock-out button.

While a test runs the core holds the table (no round opens: `SensorTestStarted`), and the
debounced inputs go to the test; the core hears them too, to keep the sensors' levels, but a
chip placed for the test is never a wager and nothing is refused. Each step reports what the
sensors saw and the coarsest edge resolution, and the test's result is journaled
(`gpio.test_ended`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tablectl.control.protocol import (
    TestBeginRequest,
    TestEndRequest,
    TestLockoutRequest,
    TestSeatRequest,
)
from tablectl.core.effects import Lamp
from tablectl.core.events import (
    ChipSensed,
    LockoutPressed,
    SensorTestEnded,
    SensorTestStarted,
)
from tablectl.core.round import Rejected
from tablectl.drivers.gpio.table_io import SensorInput, TableGpio

if TYPE_CHECKING:
    from tablectl.service.daemon import Daemon

TestRequest = TestBeginRequest | TestSeatRequest | TestLockoutRequest | TestEndRequest


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

    def close(self) -> None:
        self.gpio.test_listener = None


async def technician_test(daemon: Daemon, request: TestRequest, by: str) -> dict[str, Any]:
    """One step of a walk test, asked for on the control socket."""
    assert daemon.gpio is not None
    walk = daemon.walk_test
    match request:
        case TestBeginRequest(test=test):
            if walk is not None:
                raise Rejected(f"a {walk.test} test is already running")
            # The inputs go to the test from the moment the core holds the table.
            walk = daemon.walk_test = WalkTest(daemon.gpio, test)
            try:
                await daemon.submit(SensorTestStarted(test=test, by=by))
            except Rejected:
                walk.close()
                daemon.walk_test = None
                raise
            return {"test": test, "gpio": daemon.gpio.status()}
        case TestEndRequest():
            if walk is None:
                raise Rejected("no walk test is running")
            walk.close()
            daemon.walk_test = None
            rows = await daemon.submit(
                SensorTestEnded(
                    test="lockout" if walk.test == "lockout" else "sensors",
                    passed=tuple(walk.passed),
                    failed=tuple(walk.failed),
                    resolution_ns=walk._resolution(),
                    by=by,
                )
            )
            return {"journaled": rows}
    if walk is None:
        raise Rejected("no walk test is running: begin one first")
    if isinstance(request, TestSeatRequest):
        if not 1 <= request.seat <= daemon.config.table.seats:
            raise Rejected(f"seat {request.seat} does not exist (1..{daemon.config.table.seats})")
        return await walk.seat(request.seat, request.timeout_s)
    return await walk.lockout(request.timeout_s)
