"""Seat sensors, seat lights and the lock-out button, on gpiozero.

gpiozero calls back on its own threads; each edge is stamped there and handed to the event
loop with call_soon_threadsafe. Debounce timing runs on the loop (tablectl.drivers.gpio.debounce).
With backend "mock" the pins are gpiozero's MockFactory, driven by simulators and tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

import structlog
from gpiozero import LED, DigitalInputDevice
from gpiozero.pins.mock import MockFactory
from tablectl.drivers.gpio.debounce import PresenceDebouncer, PressDebouncer
from tablectl.drivers.link import monotonic_ms

from tablectl.config import GpioSection

log = structlog.get_logger(__name__)


def make_pin_factory(config: GpioSection) -> Any:
    """MockFactory for simulation; None lets gpiozero pick the board's native factory."""
    return MockFactory() if config.backend == "mock" else None


class TableGpio:
    def __init__(
        self,
        config: GpioSection,
        *,
        on_chip: Callable[[int, bool], None],
        on_lockout: Callable[[], None],
        pin_factory: Any = None,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._on_chip = on_chip
        self._on_lockout = on_lockout
        self._clock_ms = clock_ms
        self.pin_factory = pin_factory
        pull_up = config.active_low
        self._sensors = [
            DigitalInputDevice(pin, pull_up=pull_up, pin_factory=pin_factory)
            for pin in config.seat_sensor_pins
        ]
        self._lights = [LED(pin, pin_factory=pin_factory) for pin in config.seat_light_pins]
        self._lockout = DigitalInputDevice(
            config.lockout_pin, pull_up=pull_up, pin_factory=pin_factory
        )
        self._debouncers = [PresenceDebouncer(config.chip_present_ms) for _ in self._sensors]
        self._press = PressDebouncer(config.lockout_debounce_ms)
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self.edges = 0
        for seat, sensor in enumerate(self._sensors, start=1):
            sensor.when_activated = partial(self._from_thread, self._chip_edge, seat, True)
            sensor.when_deactivated = partial(self._from_thread, self._chip_edge, seat, False)
        self._lockout.when_activated = partial(self._from_thread, self._lockout_edge)

    def _from_thread(self, handler: Callable[..., None], *args: Any) -> None:
        # Stamp the edge where it happened; everything else runs on the loop.
        self._loop.call_soon_threadsafe(partial(handler, *args, self._clock_ms()))

    def _chip_edge(self, seat: int, level: bool, at_ms: int) -> None:
        self.edges += 1
        deb = self._debouncers[seat - 1]
        deb.edge(level, at_ms)
        self._schedule(seat)

    def _schedule(self, seat: int) -> None:
        old = self._timers.pop(seat, None)
        if old:
            old.cancel()
        due = self._debouncers[seat - 1].due_ms()
        if due is not None:
            delay = max(0, due - self._clock_ms()) / 1000
            self._timers[seat] = self._loop.call_later(delay, self._settle, seat)

    def _settle(self, seat: int) -> None:
        self._timers.pop(seat, None)
        level = self._debouncers[seat - 1].settle(self._clock_ms())
        if level is None:
            self._schedule(seat)
        else:
            self._on_chip(seat, level)

    def _lockout_edge(self, at_ms: int) -> None:
        self.edges += 1
        if self._press.press(at_ms):
            self._on_lockout()

    def resting_chips(self) -> list[int]:
        """Seats whose chip has rested past the debounce time and is still there."""
        return [seat for seat, deb in enumerate(self._debouncers, start=1) if deb.stable]

    def set_light(self, seat: int, on: bool) -> None:
        light = self._lights[seat - 1]
        light.on() if on else light.off()

    def lights(self) -> list[bool]:
        return [bool(light.value) for light in self._lights]

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for device in [*self._sensors, *self._lights, self._lockout]:
            device.close()
