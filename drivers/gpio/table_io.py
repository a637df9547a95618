"""Seat sensors, seat lights and the lock-out button.

`SeatInputs` is pure: it takes edges stamped on one monotonic clock (ns) and gives the core
its inputs -- a ChipSensed for every decided contact episode, a LockoutPressed on the
button's leading edge naming the chips that arrived before it and are still settling.
`TableGpio` is the shell around it on gpiozero: callbacks arrive on gpiozero's threads, are
stamped there and handed to the event loop with call_soon_threadsafe; one loop timer settles
the debouncers. With backend "mock" the pins are gpiozero's MockFactory, driven by simulators.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import structlog
from gpiozero import LED, DigitalInputDevice
from gpiozero.pins.mock import MockFactory
from tablectl.drivers.gpio.debounce import PressDebouncer, SeatDebouncer

from tablectl.config import GpioSection
from tablectl.core.effects import Lamp
from tablectl.core.events import ChipSensed, Event, LockoutPressed

log = structlog.get_logger(__name__)
MS = 1_000_000


class SeatInputs:
    """Edges in, core inputs out. Pure: the time of every edge and tick is passed in."""

    def __init__(self, seats: int, *, chip_present_ms: int, lockout_debounce_ms: int) -> None:
        self._seats = [SeatDebouncer(chip_present_ms * MS) for _ in range(seats)]
        self._press = PressDebouncer(lockout_debounce_ms * MS)

    def chip_edge(self, seat: int, level: bool, at_ns: int) -> None:
        self._seats[seat - 1].edge(level, at_ns)

    def lockout_edge(self, at_ns: int) -> LockoutPressed | None:
        """The leading edge of a press: "no more bets" as of at_ns; bounces give None."""
        if not self._press.press(at_ns):
            return None
        arriving = [
            seat
            for seat, deb in enumerate(self._seats, start=1)
            if (since := deb.arriving_since()) is not None and since < at_ns
        ]
        return LockoutPressed(at_ns=at_ns, undecided_seats=tuple(arriving))

    def due_ns(self) -> int | None:
        due = [d for deb in self._seats if (d := deb.due_ns()) is not None]
        return min(due, default=None)

    def settle(self, now_ns: int) -> list[ChipSensed]:
        out = []
        for seat, deb in enumerate(self._seats, start=1):
            decision = deb.settle(now_ns)
            if decision is not None:
                out.append(
                    ChipSensed(seat=seat, present=decision.present, since_ns=decision.since_ns)
                )
        return out

    def resting(self) -> list[ChipSensed]:
        """Chips that have rested past the debounce time and are still there."""
        return [
            ChipSensed(seat=seat, present=True, since_ns=since)
            for seat, deb in enumerate(self._seats, start=1)
            if (since := deb.resting_since()) is not None
        ]


def make_pin_factory(config: GpioSection) -> Any:
    """MockFactory for simulation; None lets gpiozero pick the board's native factory."""
    return MockFactory() if config.backend == "mock" else None


class TableGpio:
    def __init__(
        self,
        config: GpioSection,
        *,
        emit: Callable[[Event], None],
        pin_factory: Any = None,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._emit = emit
        self._clock_ns = clock_ns
        self.pin_factory = pin_factory
        self.inputs = SeatInputs(
            len(config.seat_sensor_pins),
            chip_present_ms=config.chip_present_ms,
            lockout_debounce_ms=config.lockout_debounce_ms,
        )
        pull_up = config.active_low
        self._sensors = [
            DigitalInputDevice(pin, pull_up=pull_up, pin_factory=pin_factory)
            for pin in config.seat_sensor_pins
        ]
        self._lights = [LED(pin, pin_factory=pin_factory) for pin in config.seat_light_pins]
        self._lockout = DigitalInputDevice(
            config.lockout_pin, pull_up=pull_up, pin_factory=pin_factory
        )
        self._lamps = [Lamp.OFF] * len(self._lights)
        self._timer: asyncio.TimerHandle | None = None
        self.edges = 0
        for seat, sensor in enumerate(self._sensors, start=1):
            sensor.when_activated = partial(self._from_thread, self._chip_edge, seat, True)
            sensor.when_deactivated = partial(self._from_thread, self._chip_edge, seat, False)
        self._lockout.when_activated = partial(self._from_thread, self._lockout_edge)

    def _from_thread(self, handler: Callable[..., None], *args: Any) -> None:
        # Stamp the edge where it happened; everything else runs on the loop.
        self._loop.call_soon_threadsafe(partial(handler, *args, self._clock_ns()))

    def _chip_edge(self, seat: int, level: bool, at_ns: int) -> None:
        self.edges += 1
        self.inputs.chip_edge(seat, level, at_ns)
        self._schedule()

    def _lockout_edge(self, at_ns: int) -> None:
        self.edges += 1
        pressed = self.inputs.lockout_edge(at_ns)
        if pressed is not None:
            self._emit(pressed)

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self.inputs.due_ns()
        if due is not None:
            delay_s = max(0, due - self._clock_ns()) / 1e9
            self._timer = self._loop.call_later(delay_s, self._settle)

    def _settle(self) -> None:
        self._timer = None
        for chip in self.inputs.settle(self._clock_ns()):
            self._emit(chip)
        self._schedule()

    def report_resting(self) -> None:
        for chip in self.inputs.resting():
            self._emit(chip)

    def set_lamp(self, seat: int, lamp: Lamp) -> None:
        light = self._lights[seat - 1]
        self._lamps[seat - 1] = lamp
        if lamp is Lamp.WIN:
            light.blink(on_time=0.25, off_time=0.25)  # 649a.11(c)(5)(ii): shows the win
        elif lamp is Lamp.ON:
            light.on()
        else:
            light.off()

    def lamps(self) -> list[str]:
        return [lamp.value for lamp in self._lamps]

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for device in [*self._sensors, *self._lights, self._lockout]:
            device.close()
