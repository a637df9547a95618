"""Seat sensors, seat lamps and the lock-out button, over any GPIO backend.

`SeatInputs` is pure: it takes edges (drivers/gpio/backend.py) and gives the core its
inputs -- a ChipSensed for every decided contact episode and for the verdict on each chip
the lock-out edge left to be decided; a LockoutPressed on the button's leading edge naming
the seats whose chip was on its sensor at the edge (docs/gpio.md, the lock-out rule); a
LockoutReleased and, held too long, a LockoutHeld; and a GpioFault when the backend's
sequence numbers show that edges were lost.
`TableGpio` is the shell: it owns the backend's task, feeds SeatInputs on the loop, settles
the debouncers with one loop timer, blinks winning lamps, and lends the inputs to a
technician's walk test.

The inputs are built with `trusted` (util/frozen.py): every value is this module's own int,
bool or tuple of ints, typed by mypy against each input's constructor, so validating them
again cost a cold edge about a third of its way to the core (bench/gpio_link_cpu.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from tablectl.drivers.gpio.backend import LOCKOUT, Edge, GpioBackend, Levels
from tablectl.drivers.gpio.debounce import LockoutButton, SeatDebouncer
from tablectl.drivers.gpio.settings import GpioSettings

from tablectl.core.effects import Lamp
from tablectl.core.events import (
    ChipSensed,
    Event,
    GpioFault,
    LockoutHeld,
    LockoutPressed,
    LockoutReleased,
)
from tablectl.util.frozen import trusted

log = structlog.get_logger(__name__)
MS = 1_000_000
BLINK_S = 0.25  # 649a.11(c)(5)(ii): a winning seat's lamp blinks

# What the sensors and the button tell the core (a walk test hears them too).
SensorInput = ChipSensed | LockoutPressed | LockoutReleased | LockoutHeld
GpioInput = SensorInput | GpioFault


@dataclass
class _Lock:
    """A lock-out edge taken, told once no edge that may have come before it can still
    arrive: with the next edge surely after it, at the end of its batch, or (a backend whose
    edges may arrive out of order) once that reordering's time has passed."""

    at_ns: int
    resolution_ns: int
    resting: set[int] = field(default_factory=set)
    undecided: set[int] = field(default_factory=set)

    def possibly_before(self, edge: Edge) -> bool:
        """The edge may have happened at or before the press (the tie rule)."""
        return edge.t_ns - max(1, edge.resolution_ns) < self.at_ns

    def pressed(self) -> LockoutPressed:
        return trusted(
            LockoutPressed,
            at_ns=self.at_ns,
            resolution_ns=self.resolution_ns,
            undecided_seats=tuple(sorted(self.undecided)),
            resting_seats=tuple(sorted(self.resting)),
        )


class SeatInputs:
    """Edges in, core inputs out. Pure: the time of every edge and tick is passed in.

    Each step appends what it decides to the caller's list (no list per step), and only the
    seats with something open are settled or asked when they are due (`_due`): an edge costs
    the work of its own seat, whatever the table's size.
    """

    def __init__(
        self,
        seats: int,
        *,
        chip_present_ms: int,
        lockout_debounce_ms: int,
        chip_bounce_ms: int = 0,
        lockout_hold_max_ms: int = 5_000,
        reorder_ns: int = 0,
    ) -> None:
        self._seats = [
            SeatDebouncer(chip_present_ms * MS, chip_bounce_ms * MS) for _ in range(seats)
        ]
        self.lockout = LockoutButton(lockout_debounce_ms * MS, lockout_hold_max_ms * MS)
        self._reorder_ns = reorder_ns  # the backend's (BackendInfo.reorder_ns)
        self._last_seq: int | None = None
        self._lock: _Lock | None = None  # taken, not yet told
        self._told: _Lock | None = None  # the last one told: what it counted
        # seat -> its debouncer's due_ns(), for the seats that have one; a seat not here
        # has nothing a settle() could decide.
        self._due: dict[int, int] = {}
        self.unknown_lines = 0

    def take(self, edges: Sequence[Edge]) -> list[GpioInput]:
        """A batch of edges, in the order the backend delivered them."""
        out: list[GpioInput] = []
        for edge in edges:
            seq = edge.seq
            if seq is not None:
                last = self._last_seq
                if last is not None and seq == last + 1:
                    self._last_seq = seq  # the next one, as nearly always: nothing to tell
                elif not self._sequence(seq, edge.t_ns, out):
                    continue  # out of order: never applied (the levels are read again)
            self._edge(edge, out)
        if self._reorder_ns == 0:
            self._tell_lock(out)
        return out

    def _sequence(self, seq: int, t_ns: int, out: list[GpioInput]) -> bool:
        """A sequence number other than the next: a fault, unless it is the first. True when
        the edge may still be applied (the first one, or one after lost edges)."""
        last = self._last_seq
        self._last_seq = seq if last is None else max(last, seq)
        if last is None or seq == last + 1:
            return True
        # The kernel numbers every edge of the request: a gap is an edge lost (its buffer
        # overflowed); going back means the order cannot be trusted.
        what = (
            f"edges lost: sequence {last + 1}..{seq - 1} missing"
            if seq > last + 1
            else f"edge out of sequence: {seq} after {last}"
        )
        out.append(GpioFault(reason=what, at_ns=t_ns))
        return seq > last

    def _edge(self, edge: Edge, out: list[GpioInput]) -> None:
        lock = self._lock
        if lock is not None and self._reorder_ns == 0 and not lock.possibly_before(edge):
            # Delivered in order, an edge surely after the press: nothing before it is left.
            self._tell_lock(out)
            lock = None
        # What rested or left before this edge is decided first (never past a pending press).
        if self._due or self.lockout.held:
            self._decide(edge.t_ns if lock is None else min(edge.t_ns, lock.at_ns), out)
        if edge.line == LOCKOUT:
            if self.lockout.edge(edge.level, edge.t_ns):
                self._tell_lock(out)
                self._lock = self._judge(edge.t_ns, edge.resolution_ns)
        elif 1 <= edge.line <= len(self._seats):
            self._chip_edge(edge, out)
        else:
            self.unknown_lines += 1

    def _judge(self, at_ns: int, resolution_ns: int) -> _Lock:
        """The lock-out edge: which seats' chips were surely on their sensors then."""
        lock = _Lock(at_ns, resolution_ns)
        for seat, deb in enumerate(self._seats, start=1):
            if not deb.level or not deb.closed_at(at_ns, resolution_ns):
                continue  # (the level first: most sensors are open, and it is no call)
            if deb.rested():
                lock.resting.add(seat)
            else:
                lock.undecided.add(seat)
                deb.watch(at_ns)  # decided when its contact rests, or leaves
                self._track(seat, deb)
        return lock

    def _chip_edge(self, edge: Edge, out: list[GpioInput]) -> None:
        seat = edge.line
        deb = self._seats[seat - 1]
        if edge.t_ns < deb.last_edge_ns:
            # One sensor's edges happen one after the other: a stamp before its line's last
            # cannot be trusted (a timestamp glitch). Applied, it would decide the chip from a
            # time it was not there -- a resting wager withdrawn, then found again when the
            # lines are read. It decides nothing; the fault's re-read decides the line once.
            out.append(
                GpioFault(
                    reason=f"seat {seat}'s edge stamped {deb.last_edge_ns - edge.t_ns} ns "
                    "before its previous edge: the order cannot be trusted",
                    at_ns=deb.last_edge_ns,
                )
            )
            return
        lock = self._lock
        if lock is not None and not edge.level and lock.possibly_before(edge):
            # Read with the press (one poll, equal stamps): it may have left before it.
            lock.resting.discard(seat)
            lock.undecided.discard(seat)
            deb.unwatch()
        told = self._told
        if (
            told is not None
            and not edge.level
            and seat in told.resting
            and told.possibly_before(edge)
        ):
            # Counted at an edge it may have left before, and heard of too late to say so:
            # the order of the edges cannot be trusted (docs/gpio.md, Order).
            told.resting.discard(seat)
            out.append(
                GpioFault(
                    reason=f"seat {seat}'s chip may have left before the lock-out edge but "
                    "was heard of after the count: check the chips against it",
                    at_ns=edge.t_ns,
                )
            )
        verdict = deb.edge(edge.level, edge.t_ns, edge.resolution_ns)
        if verdict is not None:
            out.append(
                trusted(ChipSensed, seat=seat, present=verdict.present, since_ns=verdict.since_ns)
            )
        self._track(seat, deb)

    def _track(self, seat: int, deb: SeatDebouncer) -> None:
        """Keep `_due` current after the seat's debouncer changed."""
        due = deb.due_ns()
        if due is None:
            self._due.pop(seat, None)
        else:
            self._due[seat] = due

    def _tell_lock(self, out: list[GpioInput]) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            self._told = lock
            out.append(lock.pressed())

    def resync(self, levels: Levels, at_ns: int, seq: int | None = None) -> list[GpioInput]:
        """Levels read at at_ns (after lost edges, or at start-up): a line whose level
        differs gets an edge then. No chip is judged from an edge any more.

        seq: the backend's last sequence number (a new request, a simulated table come
        back); None keeps the last one taken, so the next edge out of sequence is still
        found (a re-read after a fault is no new sequence).
        """
        out: list[GpioInput] = []
        self._tell_lock(out)
        out += self.settle(at_ns)
        for seat, deb in enumerate(self._seats, start=1):
            deb.unwatch()
            level = levels.get(seat)
            if level is not None:
                deb.edge(level, at_ns)  # a repeated level is no edge
            self._track(seat, deb)
        level = levels.get(LOCKOUT)
        if level is not None and self.lockout.edge(level, at_ns):
            # Pressed when it could not be seen: the wagers recognised so far count.
            out.append(trusted(LockoutPressed, at_ns=at_ns, resting_seats=None))
        if seq is not None:
            self._last_seq = seq
        return out

    def due_ns(self) -> int | None:
        due = min(self._due.values(), default=None)
        if (button := self.lockout.due_ns()) is not None:
            due = button if due is None else min(due, button)
        lock = self._lock
        if lock is not None and (due is None or due > lock.at_ns):
            # Nothing after the press is decided before it is told.
            due = lock.at_ns + self._reorder_ns
        return due

    def settle(self, now_ns: int) -> list[GpioInput]:
        """Everything decided by now: a lock-out edge no earlier edge can change any more,
        the button released or held too long, and each seat's episodes and verdicts."""
        out: list[GpioInput] = []
        if self._lock is not None:
            if now_ns >= self._lock.at_ns + self._reorder_ns:
                self._tell_lock(out)
            else:
                now_ns = min(now_ns, self._lock.at_ns)  # nothing after it before it is told
        self._decide(now_ns, out)
        return out

    def _decide(self, now_ns: int, out: list[GpioInput]) -> None:
        button = self.lockout
        if button.held:  # (a button up has nothing to tell)
            if (pressed := button.stuck(now_ns)) is not None:
                out.append(trusted(LockoutHeld, since_ns=pressed, at_ns=now_ns))
            if (up := button.released(now_ns)) is not None:
                out.append(trusted(LockoutReleased, at_ns=up))
        if not self._due:
            return
        due = sorted(seat for seat, at in self._due.items() if at <= now_ns)
        for seat in due:  # in seat order, as every seat used to be asked
            deb = self._seats[seat - 1]
            out.extend(
                trusted(ChipSensed, seat=seat, present=d.present, since_ns=d.since_ns)
                for d in deb.settle(now_ns)
            )
            self._track(seat, deb)


# Who hears the inputs too while a technician's walk test runs.
TestListener = Callable[[SensorInput], None]


class TableGpio:
    """The backend on the loop: edges -> SeatInputs -> core inputs; lamps out."""

    def __init__(
        self,
        config: GpioSettings,
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
            chip_bounce_ms=config.chip_bounce_ms,
            lockout_hold_max_ms=config.lockout_hold_max_ms,
            reorder_ns=backend.info.reorder_ns,
        )
        self._lamps = [Lamp.OFF] * seats
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: int | None = None  # the due_ns() the timer was set for
        self._blink: asyncio.TimerHandle | None = None
        self._blink_on = False
        self.test_listener: TestListener | None = None
        self.edges_seen = 0
        self.deaf = False  # stop_listening()
        self.coarsest_resolution_ns = 0
        self.faults = 0
        self.last_fault: str | None = None

    def start(self, levels: Levels) -> None:
        """The lines' levels as claimed: chips resting, or the button held, since before."""
        self.resync(levels, self._clock_ns(), self.backend.last_seq)

    async def run(self) -> None:
        await self.backend.run(self)

    # --- EdgeSink: the backend delivers here, on the loop -------------------------------

    def edges(self, edges: Sequence[Edge]) -> None:
        if self.deaf:
            return
        # The inputs first (a lock-out edge waits for nothing else), the bookkeeping after.
        events = self.inputs.take(edges)
        for event in events:
            self._deliver(event)
        self.edges_seen += len(edges)
        for edge in edges:
            if edge.resolution_ns > self.coarsest_resolution_ns:
                self.coarsest_resolution_ns = edge.resolution_ns
        if events and any(isinstance(event, GpioFault) for event in events):
            levels = self.backend.read_levels()
            if levels is not None:
                self.resync(levels, self._clock_ns())
        self._schedule()

    def fault(self, reason: str) -> None:
        self._deliver(GpioFault(reason=reason, at_ns=self._clock_ns()))

    def resync(self, levels: Levels, t_ns: int, seq: int | None = None) -> None:
        for event in self.inputs.resync(levels, t_ns, seq):
            self._deliver(event)
        self._schedule()

    # --------------------------------------------------------------------------------

    def _deliver(self, event: GpioInput) -> None:
        if isinstance(event, GpioFault):
            self.faults += 1
            self.last_fault = event.reason
            log.error("gpio fault", reason=event.reason, backend=self.backend.info.backend)
        elif self.test_listener is not None:
            # The core hears them too: it keeps the sensors' levels, but a walk test's chip
            # is never a wager and nothing is refused.
            self.test_listener(event)
        self._emit(event)

    def _schedule(self) -> None:
        due = self.inputs.due_ns()
        if self._timer is not None:
            if due == self._timer_due:
                return  # already set for it (a second chip while the first settles)
            self._timer.cancel()
            self._timer = None
        self._timer_due = due
        if due is not None:
            delay_s = max(0, due - self._clock_ns()) / 1e9
            self._timer = asyncio.get_running_loop().call_later(delay_s, self.settle)

    def settle(self) -> None:
        """Decide everything due by now (the timer; tests on a clock)."""
        self._timer = None
        for event in self.inputs.settle(self._clock_ns()):
            self._deliver(event)
        self._schedule()

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

    def stop_listening(self) -> None:
        """The daemon is stopping: edges are dropped as they come. A chattering sensor's
        flood then costs the loop next to nothing, and the stop's own work is not held
        behind the debouncing of edges nobody will act on."""
        self.deaf = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        for timer in (self._timer, self._blink):
            if timer is not None:
                timer.cancel()
        self.backend.close()
