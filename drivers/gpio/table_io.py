"""Seat sensors, seat lamps and the lock-out button, over any GPIO backend.

`SeatInputs` is pure: it takes edges (drivers/gpio/backend.py) and gives the core its
inputs -- a ChipSensed for every decided contact episode, a LockoutPressed on the button's
leading edge naming the chips that surely arrived before it and are still settling, and a
GpioFault when the backend's sequence numbers show that edges were lost.
`TableGpio` is the shell: it owns the backend's task, feeds SeatInputs on the loop, settles
the debouncers with one loop timer, blinks winning lamps, and can lend the inputs to a
technician's walk test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from tablectl.drivers.gpio.backend import LOCKOUT, Edge, GpioBackend, Levels
from tablectl.drivers.gpio.debounce import PressDebouncer, SeatDebouncer

from tablectl.config import GpioSection
from tablectl.core.effects import Lamp
from tablectl.core.events import (
    ChipSensed,
    Event,
    GpioFault,
    LockoutPressed,
    placed_before_lockout,
)

log = structlog.get_logger(__name__)
MS = 1_000_000
BLINK_S = 0.25  # 649a.11(c)(5)(ii): a winning seat's lamp blinks


class SeatInputs:
    """Edges in, core inputs out. Pure: the time of every edge and tick is passed in."""

    def __init__(self, seats: int, *, chip_present_ms: int, lockout_debounce_ms: int) -> None:
        self._seats = [SeatDebouncer(chip_present_ms * MS) for _ in range(seats)]
        self._press = PressDebouncer(lockout_debounce_ms * MS)
        self._last_seq: int | None = None
        self.lockout_level = False
        self.unknown_lines = 0

    def take(self, edge: Edge) -> list[LockoutPressed | GpioFault]:
        """One edge, in the order the backend delivered it."""
        out: list[LockoutPressed | GpioFault] = []
        if edge.seq is not None:
            last = self._last_seq
            if last is not None and edge.seq != last + 1:
                # The kernel numbers every edge of the request: a gap is an edge lost
                # (its buffer overflowed); going back means the order cannot be trusted.
                what = (
                    f"edges lost: sequence {last + 1}..{edge.seq - 1} missing"
                    if edge.seq > last + 1
                    else f"edge out of sequence: {edge.seq} after {last}"
                )
                out.append(GpioFault(reason=what, at_ns=edge.t_ns))
            self._last_seq = edge.seq if last is None else max(last, edge.seq)
        if edge.line == LOCKOUT:
            rising = edge.level and not self.lockout_level
            self.lockout_level = edge.level
            if rising:
                pressed = self.lockout_edge(edge.t_ns, edge.resolution_ns)
                if pressed is not None:
                    out.append(pressed)
        elif 1 <= edge.line <= len(self._seats):
            self.chip_edge(edge.line, edge.level, edge.t_ns)
        else:
            self.unknown_lines += 1
        return out

    def chip_edge(self, seat: int, level: bool, at_ns: int) -> None:
        self._seats[seat - 1].edge(level, at_ns)

    def lockout_edge(self, at_ns: int, resolution_ns: int = 1) -> LockoutPressed | None:
        """The leading edge of a press: "no more bets" as of at_ns; bounces give None."""
        if not self._press.press(at_ns):
            return None
        arriving = [
            seat
            for seat, deb in enumerate(self._seats, start=1)
            if (since := deb.arriving_since()) is not None
            and placed_before_lockout(since, at_ns, resolution_ns)
        ]
        return LockoutPressed(
            at_ns=at_ns, undecided_seats=tuple(arriving), resolution_ns=resolution_ns
        )

    def resync(self, levels: Levels, at_ns: int, seq: int | None = None) -> None:
        """Levels read at at_ns: a seat whose level differs gets an edge then.

        seq: the backend's last sequence number, or None to take the next edge's as given.
        """
        for seat, deb in enumerate(self._seats, start=1):
            level = levels.get(seat)
            if level is not None:
                deb.edge(level, at_ns)  # a repeated level is no edge
        self.lockout_level = bool(levels.get(LOCKOUT, self.lockout_level))
        self._last_seq = seq

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


# Who receives the inputs while a technician's walk test holds them.
TestListener = Callable[[ChipSensed | LockoutPressed], None]


class TableGpio:
    """The backend on the loop: edges -> SeatInputs -> core inputs; lamps out."""

    def __init__(
        self,
        config: GpioSection,
        backend: GpioBackend,
        *,
        seats: int,
        emit: Callable[[Event], None],
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.backend = backend
        self._emit = emit
        self._clock_ns = clock_ns
        self.inputs = SeatInputs(
            seats,
            chip_present_ms=config.chip_present_ms,
            lockout_debounce_ms=config.lockout_debounce_ms,
        )
        self._lamps = [Lamp.OFF] * seats
        self._timer: asyncio.TimerHandle | None = None
        self._blink: asyncio.TimerHandle | None = None
        self._blink_on = False
        self.test_listener: TestListener | None = None
        self.edges_seen = 0
        self.coarsest_resolution_ns = 0
        self.faults = 0
        self.last_fault: str | None = None

    def start(self, levels: Levels) -> None:
        """The lines' levels as claimed: chips resting since before start-up."""
        self.inputs.resync(levels, self._clock_ns(), self.backend.last_seq)
        self._schedule()

    async def run(self) -> None:
        await self.backend.run(self)

    # --- EdgeSink: the backend delivers here, on the loop -------------------------------

    def edges(self, edges: Sequence[Edge]) -> None:
        lost = False
        for edge in edges:
            self.edges_seen += 1
            self.coarsest_resolution_ns = max(self.coarsest_resolution_ns, edge.resolution_ns)
            for event in self.inputs.take(edge):
                if isinstance(event, GpioFault):
                    lost = True
                    self._fault(event)
                else:
                    self._deliver(event)
        if lost:
            levels = self.backend.read_levels()
            if levels is not None:
                self.resync(levels, self._clock_ns())
        self._schedule()

    def fault(self, reason: str) -> None:
        self._fault(GpioFault(reason=reason, at_ns=self._clock_ns()))

    def resync(self, levels: Levels, t_ns: int, seq: int | None = None) -> None:
        self.inputs.resync(levels, t_ns, seq)
        self._schedule()

    # --------------------------------------------------------------------------------

    def _fault(self, fault: GpioFault) -> None:
        self.faults += 1
        self.last_fault = fault.reason
        log.error("gpio fault", reason=fault.reason, backend=self.backend.info.backend)
        self._emit(fault)

    def _deliver(self, event: ChipSensed | LockoutPressed) -> None:
        if self.test_listener is not None:
            self.test_listener(event)
        else:
            self._emit(event)

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self.inputs.due_ns()
        if due is not None:
            delay_s = max(0, due - self._clock_ns()) / 1e9
            self._timer = asyncio.get_running_loop().call_later(delay_s, self.settle)

    def settle(self) -> None:
        """Decide every episode that has rested by now (the timer; tests on a clock)."""
        self._timer = None
        for chip in self.inputs.settle(self._clock_ns()):
            self._deliver(chip)
        self._schedule()

    def report_resting(self) -> None:
        for chip in self.inputs.resting():
            self._deliver(chip)

    def set_lamp(self, seat: int, lamp: Lamp) -> None:
        self._lamps[seat - 1] = lamp
        if lamp is Lamp.WIN:
            self.backend.set_lamp(seat, self._blink_on)
            if self._blink is None:
                self._blink = asyncio.get_running_loop().call_later(BLINK_S, self._toggle)
        else:
            self.backend.set_lamp(seat, lamp is Lamp.ON)

    def _toggle(self) -> None:
        self._blink = None
        winning = [seat for seat, lamp in enumerate(self._lamps, start=1) if lamp is Lamp.WIN]
        if not winning:
            return
        self._blink_on = not self._blink_on
        for seat in winning:
            self.backend.set_lamp(seat, self._blink_on)
        self._blink = asyncio.get_running_loop().call_later(BLINK_S, self._toggle)

    def lamps(self) -> list[str]:
        return [lamp.value for lamp in self._lamps]

    def status(self) -> dict[str, Any]:
        info = self.backend.info
        return {
            "backend": info.backend,
            "where": info.where,
            "polled": info.polled,
            "resolution_ns": info.resolution_ns,
            "kernel_sequence": info.kernel_sequence,
            "edges": self.edges_seen,
            "coarsest_resolution_ns": self.coarsest_resolution_ns,
            "faults": self.faults,
            "last_fault": self.last_fault,
        }

    def health(self) -> dict[str, Any]:
        """What the backend sees of the sensors (changes only with a fault or a backend)."""
        info = self.backend.info
        return {
            "backend": info.backend,
            "polled": info.polled,
            "resolution_ns": info.resolution_ns,
            "faults": self.faults,
            "last_fault": self.last_fault,
        }

    def close(self) -> None:
        for timer in (self._timer, self._blink):
            if timer is not None:
                timer.cancel()
        self.backend.close()
