"""The lock-out button as a board's kernel reports it, for the latency benches (issue 29 item 4).

The daemon's GPIO is the production libgpiod backend (drivers/gpio/gpiod_backend.py,
`GpiodBackend`, as `gpio.backend = "auto"` picks it on a board with interrupts) on the
simulated chip the tests use (simulators/gpio_chip.py, `FakeChip`): an edge is the kernel's
48-byte `struct gpio_v2_line_event` written into a real pipe, whose read end the event loop
watches (`loop.add_reader` on the line request's fd), read and decoded into gpiod's own
`EdgeEvent`, debounced and turned into the lock-out input as on a board. The button is pressed
from a thread of its own standing for the kernel's interrupt handler: the loop, asleep in
epoll or busy with other work, learns of the press only from the fd, as on a board. A press is
asked for without waking the loop (a queue the thread blocks on); t0 is taken in that thread
just before the record is written.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tablectl.drivers.gpio.backend import EdgeSink
from tablectl.drivers.gpio.gpiod_backend import GpiodBackend
from tablectl.simulators.gpio_chip import FakeChip

from tablectl.config import GpioSection

HOLD_S = 0.08  # a dealer's press: the release comes long after the lock-out is published


@dataclass
class _Press:
    after_s: float
    hold_s: float


class KernelButton:
    """The table's GPIO chip, and a thread that presses its lock-out button on request."""

    def __init__(self, gpio: GpioSection, stamp_ns: Callable[[], int]) -> None:
        self.gpio = gpio
        self.chip = FakeChip()
        self._stamp_ns = stamp_ns  # the clock t0 is read on (the bench's own)
        self.pressed_at: list[int] = []  # t0 of each press, on stamp_ns
        self.on_loop_at: list[int] = []  # when the loop read each batch of edges, on stamp_ns
        self.released = threading.Event()
        self.released.set()
        self._presses: queue.SimpleQueue[_Press | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kernel-gpio", daemon=True)
        self._thread.start()

    def backend(self) -> GpiodBackend:
        """The daemon's backend: production code, on this chip."""
        button = self

        class Timed(GpiodBackend):
            def _readable(self, sink: EdgeSink) -> None:
                button.on_loop_at.append(button._stamp_ns())
                super()._readable(sink)

        lockout: int | str = self.gpio.lockout_pin
        return Timed(
            self.chip,
            sensors=list(self.gpio.seat_sensor_pins),
            lockout=lockout,
            lamps=list(self.gpio.seat_light_pins),
            active_low=self.gpio.active_low,
        )

    def press(self, after_s: float = 0.0, hold_s: float = HOLD_S) -> None:
        """Press the button after_s from now (from the kernel's thread), hold it hold_s."""
        self.released.clear()
        self._presses.put(_Press(after_s, hold_s))

    def _line(self) -> int:
        (offset,) = self.chip.resolve([self.gpio.lockout_pin])
        return offset

    def _run(self) -> None:
        while (press := self._presses.get()) is not None:
            if press.after_s:
                time.sleep(press.after_s)
            line = self._line()
            self.pressed_at.append(self._stamp_ns())
            self.chip.set_logical(line, True)
            time.sleep(press.hold_s)
            self.chip.set_logical(line, False)
            self.released.set()

    def close(self) -> None:
        self._presses.put(None)
        self._thread.join()
