"""gpiozero, for the Raspberry Pi: its callbacks arrive on its own threads.

gpiozero finds pins through the Pi's board revision, so it runs on a Raspberry Pi only
(elsewhere every pin factory fails with PinUnknownPi); `backend = "auto"` never picks it.
Each callback is stamped where it runs and handed to the loop with call_soon_threadsafe:
the stamp is late by the callback thread's wake-up, which is taken as its resolution, and
there are no sequence numbers, so a lost edge cannot be seen. The threads give no order
between pins: an edge may reach the loop after another stamped later, by about a thread's
wake-up. The backend says so (`reorder_ns`), and the lock-out edge is judged only once
every edge that may have come before it has had time to arrive (docs/gpio.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from tablectl.drivers.gpio.backend import (
    BackendInfo,
    Edge,
    EdgeSink,
    GpioUnavailable,
    Levels,
)

# A callback thread wakes within about a millisecond of the edge on a Pi: a tie window.
GPIOZERO_RESOLUTION_NS = 1_000_000
# An edge stamped before another reaches the loop at most this much after it (a stamp is
# late by up to its resolution, its hand-over by about half of it more).
GPIOZERO_REORDER_NS = 2 * GPIOZERO_RESOLUTION_NS


class GpiozeroBackend:
    def __init__(
        self,
        *,
        sensors: Sequence[int | str],
        lockout: int | str,
        lamps: Sequence[int | str],
        active_low: bool,
        pin_factory: Any = None,  # None: gpiozero's default (the Pi's); tests: MockFactory
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._pins = [lockout, *sensors]  # index = logical line
        self._lamp_pins = list(lamps)
        self._active_low = active_low
        self.pin_factory = pin_factory
        self._clock_ns = clock_ns
        self.info = BackendInfo(
            backend="gpiozero",
            where="gpiozero pin factory",
            polled=False,
            resolution_ns=GPIOZERO_RESOLUTION_NS,
            kernel_sequence=False,
            reorder_ns=GPIOZERO_REORDER_NS,
        )
        self.last_seq: int | None = None  # gpiozero numbers nothing
        self._inputs: list[Any] = []
        self._lights: list[Any] = []
        self._sink: EdgeSink | None = None
        self._pending: list[Edge] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    async def open(self) -> Levels:
        from gpiozero import LED, DigitalInputDevice
        from gpiozero.exc import GPIOZeroError

        self._loop = asyncio.get_running_loop()
        try:
            self._inputs = [
                DigitalInputDevice(pin, pull_up=self._active_low, pin_factory=self.pin_factory)
                for pin in self._pins
            ]
            self._lights = [LED(pin, pin_factory=self.pin_factory) for pin in self._lamp_pins]
        except GPIOZeroError as exc:
            self.close()
            raise GpioUnavailable(
                f"gpiozero: {exc} (gpiozero runs on a Raspberry Pi only; elsewhere set "
                'gpio.backend = "auto" for libgpiod)'
            ) from None
        for line, device in enumerate(self._inputs):
            device.when_activated = partial(self._from_thread, line, True)
            device.when_deactivated = partial(self._from_thread, line, False)
        levels = self.read_levels()
        assert levels is not None
        return levels

    def _from_thread(self, line: int, level: bool) -> None:
        # Stamp the edge where it happened; everything else runs on the loop.
        edge = Edge(line, level, self._clock_ns(), None, GPIOZERO_RESOLUTION_NS)
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._deliver, edge)

    def _deliver(self, edge: Edge) -> None:
        if self._sink is None:
            self._pending.append(edge)
        else:
            self._sink.edges([edge])

    async def run(self, sink: EdgeSink) -> None:
        self._sink = sink
        if self._pending:
            pending, self._pending = self._pending, []
            sink.edges(pending)
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            self._sink = None

    def read_levels(self) -> Levels | None:
        return {line: bool(device.is_active) for line, device in enumerate(self._inputs)}

    def set_lamp(self, seat: int, on: bool) -> None:
        light = self._lights[seat - 1]
        light.on() if on else light.off()

    def close(self) -> None:
        for device in [*self._inputs, *self._lights]:
            device.close()
        self._inputs, self._lights = [], []
