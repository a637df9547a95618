"""The GPIO seam: what every backend gives tablectl, and what it is told.

A backend yields edges `(line, level, t_ns, seq, resolution_ns)` on CLOCK_MONOTONIC and sets
lamps. Lines are logical: seat N's sensor is line N (1-based, as seats are), the lock-out
button is line 0 (`LOCKOUT`). Levels are logical too (True: a chip rests on the sensor, the
button is pressed), whatever the wiring's polarity. Debouncing, rest time and the order of a
chip against the lock-out are decided in tablectl (`table_io.SeatInputs`) from these stamps,
never by a kernel or library debouncer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

LOCKOUT = 0  # the lock-out button's logical line; seat N's sensor is line N
Levels = Mapping[int, bool]  # logical line -> level


class Edge(NamedTuple):
    """One edge: `line` went to `level`, at the latest at t_ns (CLOCK_MONOTONIC).

    The edge happened within (t_ns - resolution_ns, t_ns]: 1 ns for a kernel timestamp, the
    sampling period for a polled backend. `seq` is the backend's sequence number over all
    its input lines (the kernel's global seqno for one line request); None where the
    backend has none, so no loss can be detected from it.

    A named tuple, not a frozen dataclass: one is built for every edge on the lock-out's
    path, and a tuple is built in a third of the time (a frozen dataclass sets each field
    through object.__setattr__).
    """

    line: int
    level: bool
    t_ns: int
    seq: int | None
    resolution_ns: int


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What status shows of a backend."""

    backend: str  # gpiod, gpiod-poll, gpiozero, mock
    where: str  # the chip, the pin factory, the simulator's socket
    polled: bool
    resolution_ns: int  # nominal: an edge's stamp is late by at most this
    kernel_sequence: bool  # lost edges are detected from sequence numbers
    # Edges of different lines may arrive out of their stamps' order by up to this long
    # (gpiozero's callback threads); 0: in order, one moment's edges delivered together.
    reorder_ns: int = 0


class GpioUnavailable(Exception):
    """The backend cannot start on this machine; the message says what it looked for."""


class EdgeSink(Protocol):
    """Where a backend delivers, always on the event loop's thread."""

    def edges(self, edges: Sequence[Edge]) -> None: ...

    def fault(self, reason: str) -> None:
        """Edges may have been lost (a failed read, a lost link)."""

    def resync(self, levels: Levels, t_ns: int, seq: int | None = None) -> None:
        """The lines' levels as read at t_ns (a link come back); seq: the backend's last."""


class GpioBackend(Protocol):
    info: BackendInfo
    # The sequence number just before the first edge run() delivers (0 for a new kernel
    # request), so a loss even before it is seen; None: the first edge sets it.
    last_seq: int | None

    async def open(self) -> Levels:
        """Claim the lines; the levels they have now. Raises GpioUnavailable."""

    async def run(self, sink: EdgeSink) -> None:
        """Deliver edges to sink until cancelled (the daemon's task group owns this)."""

    def read_levels(self) -> Levels | None:
        """The levels now, if they can be read at once (to resync after lost edges)."""

    def set_lamp(self, seat: int, on: bool) -> None: ...

    def close(self) -> None: ...


def lines_of(seats: int) -> list[int]:
    """Every logical input line of a table: the lock-out, then the seats."""
    return [LOCKOUT, *range(1, seats + 1)]
