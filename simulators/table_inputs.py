"""The table's physical inputs and lamps, simulated: chips on sensors, the dealer's button.

Every change of a sensor or the button is an edge stamped on CLOCK_MONOTONIC (the clock the
daemon and the kernel use) and numbered like the kernel's global sequence numbers. The same
object serves the daemon in the same process (`backend()`: the demo, tests) or in another
one (`serve()`: a Unix socket the daemon's mock backend connects to, for
`tablectl simulate table`). Knobs: drop edges (a sequence gap), pull the cable.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from tablectl.drivers.gpio.backend import LOCKOUT, Edge, lines_of
from tablectl.drivers.gpio.mock import MockBackend, edge_line, hello_line, lamp_message

log = structlog.get_logger(__name__)


def _clear_socket(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a simulator that was killed


class SimulatedTableInputs:
    def __init__(self, seats: int, *, clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.seats = seats
        self._clock_ns = clock_ns
        self.levels: dict[int, bool] = dict.fromkeys(lines_of(seats), False)
        self.lamps: dict[int, bool] = dict.fromkeys(range(1, seats + 1), False)
        self.seq = 0
        self.drop_edges = 0  # knob: the next N edges are lost (the daemon sees a gap)
        self.unplugged = False  # knob: the cable to the daemon is pulled
        self.on_lamp: Callable[[int, bool], None] | None = None
        self._listeners: list[Callable[[Edge], None]] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._backend: MockBackend | None = None

    # --- what people do at the table ----------------------------------------------------

    def _change(self, line: int, level: bool) -> None:
        if self.levels[line] == level:
            return
        self.levels[line] = level
        self.seq += 1
        if self.drop_edges > 0:
            self.drop_edges -= 1
            return
        edge = Edge(line, level, self._clock_ns(), self.seq, 1)
        for listener in list(self._listeners):
            listener(edge)

    def _seat(self, seat: int) -> int:
        if not 1 <= seat <= self.seats:
            raise ValueError(f"seat {seat}: this table has seats 1 to {self.seats}")
        return seat

    def place_chip(self, seat: int) -> None:
        self._change(self._seat(seat), True)

    def remove_chip(self, seat: int) -> None:
        self._change(self._seat(seat), False)

    def bounce_chip(self, seat: int, times: int = 3) -> None:
        """A chip tossed onto the sensor: contacts chatter before it rests (or rolls off)."""
        for _ in range(times):
            self.place_chip(seat)
            self.remove_chip(seat)

    def press_lockout(self) -> None:
        self._change(LOCKOUT, True)
        self._change(LOCKOUT, False)

    def hold_lockout(self) -> None:
        """The button pressed and not let go (stuck, or a dealer leaning on it)."""
        self._change(LOCKOUT, True)

    def release_lockout(self) -> None:
        self._change(LOCKOUT, False)

    def light_is_on(self, seat: int) -> bool:
        return self.lamps[self._seat(seat)]

    def _lamp(self, seat: int, on: bool) -> None:
        if 1 <= seat <= self.seats:
            self.lamps[seat] = on
            if self.on_lamp is not None:
                self.on_lamp(seat, on)

    # --- the daemon in this process -----------------------------------------------------

    def backend(self) -> MockBackend:
        """The daemon's backend, wired to this table in the same process."""
        backend = MockBackend(self.seats, where="simulated table (in-process)")
        backend.levels.update(self.levels)
        backend.last_seq = self.seq
        backend.on_lamp = self._lamp
        if self._backend is not None:  # the daemon restarted: its old backend is gone
            self._listeners.remove(self._backend.deliver)
        self._backend = backend
        self._listeners.append(backend.deliver)
        return backend

    # --- the daemon in another process --------------------------------------------------

    async def serve(self, path: Path) -> asyncio.Server:
        _clear_socket(path)
        return await asyncio.start_unix_server(self._connected, path=str(path))

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.unplugged:
            writer.close()
            return

        def send(edge: Edge) -> None:
            writer.write(edge_line(edge))

        self._writers.add(writer)
        writer.write(hello_line(self.seats, self.levels, self.seq, self._clock_ns()))
        self._listeners.append(send)
        try:
            async for line in reader:
                lamp = lamp_message(line)
                if lamp is None:
                    log.warning("malformed line from the daemon", line=line[:80])
                    continue
                self._lamp(lamp.seat, lamp.on)
        except (ConnectionError, asyncio.CancelledError):
            pass  # the daemon left, or the simulator is closing: the connection ends quietly
        finally:
            self._listeners.remove(send)
            self._writers.discard(writer)
            writer.close()

    def unplug(self) -> None:
        """Pull the cable: the daemon loses its link (a GPIO fault) until plug()."""
        self.unplugged = True
        for writer in list(self._writers):
            writer.close()

    def plug(self) -> None:
        self.unplugged = False
