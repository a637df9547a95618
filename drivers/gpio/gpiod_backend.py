"""libgpiod v2 backends: kernel-timestamped edges, or polled levels where a chip has no IRQ.

`GpiodBackend` asks for every seat sensor and the lock-out in ONE multi-line edge request on
one chip, so the kernel's global sequence numbers order all of them and a gap shows a lost
edge (the kernel's event buffer overflowed). Edges on both directions are stamped by the
kernel on CLOCK_MONOTONIC; the request's fd sits on the event loop (`loop.add_reader`), no
thread per pin. Lamps are a separate output request.

`GpiodPollBackend` is for chips whose lines cannot raise interrupts (many Super-I/O GPIO
chips answer an edge request with ENXIO): it reads every input at `poll_period_ms` and
stamps each change at the read, reporting the interval since the previous read as the
edge's resolution.

Both reach the chip through `ChipPort`: `GpiodChip` in production, a fake chip that writes
the kernel's edge records into a pipe in tests (simulators/gpio_chip.py).
"""

from __future__ import annotations

import asyncio
import errno
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import gpiod
import structlog
from gpiod.line import Clock, Direction, Value
from gpiod.line import Edge as EdgeDetection
from tablectl.drivers.gpio.backend import (
    BackendInfo,
    Edge,
    EdgeSink,
    GpioUnavailable,
    Levels,
)

log = structlog.get_logger(__name__)
CONSUMER = "tablectl"
KERNEL_RESOLUTION_NS = 1  # stamped by the kernel in its interrupt handler
READ_RETRY_S = 1.0  # after a failed read, try the fd again (quietly) this often
RISING = gpiod.EdgeEvent.Type.RISING_EDGE
EDGES_UNSUPPORTED = {errno.ENXIO, errno.EOPNOTSUPP}  # no IRQ behind the line


class EdgesUnsupported(GpioUnavailable):
    """The chip cannot report edges on these lines (no interrupt): poll it instead."""


class LineRequestLike(Protocol):
    """What the backends use of a gpiod.LineRequest."""

    @property
    def fd(self) -> int: ...

    def read_edge_events(self, max_events: int | None = None) -> list[gpiod.EdgeEvent]: ...

    def get_values(self, lines: Iterable[int | str] | None = None) -> list[Value]: ...

    def set_values(self, values: dict[int | str, Value]) -> None: ...

    def release(self) -> None: ...


class ChipPort(Protocol):
    path: str

    def resolve(self, lines: Sequence[int | str]) -> list[int]:
        """Each line's offset (names looked up on the chip); GpioUnavailable naming a miss."""

    def request_inputs(
        self, offsets: Sequence[int], *, active_low: bool, edges: bool
    ) -> LineRequestLike: ...

    def request_outputs(self, offsets: Sequence[int]) -> LineRequestLike: ...

    def close(self) -> None: ...


def _unavailable(what: str, exc: OSError) -> GpioUnavailable:
    if exc.errno in EDGES_UNSUPPORTED:
        return EdgesUnsupported(f"{what}: the chip cannot report edges ({exc.strerror})")
    if exc.errno == errno.EBUSY:
        return GpioUnavailable(f"{what}: a line is in use by another program (see gpioinfo)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return GpioUnavailable(
            f"{what}: permission denied: run the daemon as tablectl, the user the udev rules "
            "give the chips to (systemd/99-tablectl.rules)"
        )
    return GpioUnavailable(f"{what}: {exc.strerror or exc}")


class GpiodChip:
    """A /dev/gpiochipN through libgpiod v2."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._chip = gpiod.Chip(path)
        except OSError as exc:
            raise _unavailable(f"cannot open {path}", exc) from exc

    def resolve(self, lines: Sequence[int | str]) -> list[int]:
        offsets = []
        for line in lines:
            try:
                offsets.append(self._chip.line_offset_from_id(line))
            except (OSError, ValueError):
                raise GpioUnavailable(f"{self.path} has no line {line!r}") from None
        return offsets

    def request_inputs(
        self, offsets: Sequence[int], *, active_low: bool, edges: bool
    ) -> LineRequestLike:
        settings = gpiod.LineSettings(
            direction=Direction.INPUT,
            # Both directions, and no kernel debounce: it would stamp edges late.
            edge_detection=EdgeDetection.BOTH if edges else EdgeDetection.NONE,
            active_low=active_low,
            event_clock=Clock.MONOTONIC,
        )
        try:
            return self._chip.request_lines({tuple(offsets): settings}, consumer=CONSUMER)
        except OSError as exc:
            raise _unavailable(f"{self.path} lines {list(offsets)}", exc) from exc

    def request_outputs(self, offsets: Sequence[int]) -> LineRequestLike:
        settings = gpiod.LineSettings(direction=Direction.OUTPUT, output_value=Value.INACTIVE)
        try:
            return self._chip.request_lines({tuple(offsets): settings}, consumer=CONSUMER)
        except OSError as exc:
            raise _unavailable(f"{self.path} lamp lines {list(offsets)}", exc) from exc

    def close(self) -> None:
        self._chip.close()


class _GpiodLines:
    """What both gpiod backends share: the lines claimed, levels read, lamps set."""

    def __init__(
        self,
        chip: ChipPort,
        *,
        sensors: Sequence[int | str],
        lockout: int | str,
        lamps: Sequence[int | str],
        active_low: bool,
    ) -> None:
        self._chip = chip
        self._inputs: list[int | str] = [lockout, *sensors]  # index = logical line
        self._lamp_lines = list(lamps)
        self._active_low = active_low
        self._req: LineRequestLike | None = None
        self._out: LineRequestLike | None = None
        self._offsets: list[int] = []
        self._lamp_offsets: list[int] = []
        self._line_of: dict[int, int] = {}
        self.last_seq: int | None = None

    def _claim(self, *, edges: bool) -> Levels:
        self._offsets = self._chip.resolve(self._inputs)
        self._line_of = {offset: line for line, offset in enumerate(self._offsets)}
        self._lamp_offsets = self._chip.resolve(self._lamp_lines)
        self._req = self._chip.request_inputs(
            self._offsets, active_low=self._active_low, edges=edges
        )
        self._out = self._chip.request_outputs(self._lamp_offsets)
        levels = self.read_levels()
        assert levels is not None
        return levels

    def _values(self) -> list[Value]:
        assert self._req is not None
        return self._req.get_values(list(self._offsets))

    def read_levels(self) -> Levels | None:
        try:
            values = self._values()
        except OSError:
            return None
        return {line: value is Value.ACTIVE for line, value in enumerate(values)}

    def set_lamp(self, seat: int, on: bool) -> None:
        if self._out is None:
            return
        value = Value.ACTIVE if on else Value.INACTIVE
        try:
            self._out.set_values({self._lamp_offsets[seat - 1]: value})
        except OSError as exc:
            log.warning("lamp not set", seat=seat, error=str(exc))

    def close(self) -> None:
        for req in (self._req, self._out):
            if req is not None:
                req.release()
        self._req = self._out = None
        self._chip.close()


class GpiodBackend(_GpiodLines):
    """Kernel-timestamped edges from one multi-line request, read on the event loop."""

    def __init__(
        self,
        chip: ChipPort,
        *,
        sensors: Sequence[int | str],
        lockout: int | str,
        lamps: Sequence[int | str],
        active_low: bool,
    ) -> None:
        super().__init__(chip, sensors=sensors, lockout=lockout, lamps=lamps, active_low=active_low)
        self.info = BackendInfo(
            backend="gpiod",
            where=chip.path,
            polled=False,
            resolution_ns=KERNEL_RESOLUTION_NS,
            kernel_sequence=True,
        )
        self._failing = False
        self.retry_s = READ_RETRY_S
        self._retry: asyncio.TimerHandle | None = None
        self.unknown_offsets = 0

    async def open(self) -> Levels:
        levels = self._claim(edges=True)
        self.last_seq = 0  # the kernel numbers a new request's edges from 1
        return levels

    async def run(self, sink: EdgeSink) -> None:
        assert self._req is not None
        loop = asyncio.get_running_loop()
        fd = self._req.fd
        loop.add_reader(fd, self._readable, sink)
        try:
            await loop.create_future()  # until cancelled
        finally:
            loop.remove_reader(fd)
            if self._retry is not None:
                self._retry.cancel()

    def _readable(self, sink: EdgeSink) -> None:
        assert self._req is not None
        try:
            events = self._req.read_edge_events()
        except OSError as exc:
            self._read_failed(sink, exc)
            return
        self._failing = False
        edges = []
        for event in events:
            line = self._line_of.get(event.line_offset)
            if line is None:
                self.unknown_offsets += 1
                continue
            edges.append(
                Edge(
                    line=line,
                    level=event.event_type is RISING,
                    t_ns=event.timestamp_ns,
                    seq=event.global_seqno,
                    resolution_ns=KERNEL_RESOLUTION_NS,
                )
            )
        if edges:
            sink.edges(edges)

    def _read_failed(self, sink: EdgeSink, exc: OSError) -> None:
        # A failed read may have lost edges: a fault, once; then retry quietly.
        assert self._req is not None
        loop = asyncio.get_running_loop()
        fd = self._req.fd
        loop.remove_reader(fd)
        if not self._failing:
            self._failing = True
            sink.fault(f"edge read failed on {self._chip.path}: {exc.strerror or exc}")
        self._retry = loop.call_later(self.retry_s, loop.add_reader, fd, self._readable, sink)


class GpiodPollBackend(_GpiodLines):
    """Every input read at a fixed period; a change is stamped at the read that saw it."""

    def __init__(
        self,
        chip: ChipPort,
        *,
        sensors: Sequence[int | str],
        lockout: int | str,
        lamps: Sequence[int | str],
        active_low: bool,
        period_ms: int,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        super().__init__(chip, sensors=sensors, lockout=lockout, lamps=lamps, active_low=active_low)
        self.period_ns = period_ms * 1_000_000
        self.info = BackendInfo(
            backend="gpiod-poll",
            where=chip.path,
            polled=True,
            resolution_ns=self.period_ns,
            kernel_sequence=False,
        )
        self._clock_ns = clock_ns
        self._levels: dict[int, bool] = {}  # as last read; no sequence numbers when polled
        self._read_at = 0
        self._failing = False
        self.late_polls = 0

    async def open(self) -> Levels:
        levels = self._claim(edges=False)
        self._levels = dict(levels)
        self._read_at = self._clock_ns()
        return levels

    async def run(self, sink: EdgeSink) -> None:
        while True:
            await asyncio.sleep(self.period_ns / 1e9)
            self.poll(sink)

    def poll(self, sink: EdgeSink) -> None:
        """One read of every input: each change since the last read is an edge."""
        try:
            values = self._values()
        except OSError as exc:
            if not self._failing:
                self._failing = True
                sink.fault(f"line read failed on {self._chip.path}: {exc.strerror or exc}")
            return
        now = self._clock_ns()
        # The change happened after the previous read: that interval is its resolution.
        resolution = max(1, now - self._read_at)
        if resolution > 2 * self.period_ns:
            self.late_polls += 1  # the loop was busy: the stamps are coarser, and say so
        self._read_at = now
        edges = []
        for line, value in enumerate(values):
            level = value is Value.ACTIVE
            if self._levels.get(line) != level:
                self._levels[line] = level
                edges.append(Edge(line, level, now, None, resolution))
        if self._failing:
            # Reads work again; what changed meanwhile is in these levels.
            self._failing = False
            sink.resync(dict(self._levels), now)
        elif edges:
            sink.edges(edges)
