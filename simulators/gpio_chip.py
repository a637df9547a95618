"""A simulated GPIO chip for the libgpiod backends, on a machine without GPIO in its kernel.

`FakeChip` stands where `GpiodChip` does (drivers/gpio/gpiod_backend.py `ChipPort`). Its
edge request hands the backend a real pipe fd: each input change writes the kernel's own
48-byte `struct gpio_v2_line_event` (timestamp, event id, offset, global and per-line
sequence numbers) into the pipe, and `read_edge_events` decodes what it reads into real
`gpiod.EdgeEvent` objects. So the production path -- fd readiness on the event loop,
event decoding, sequence handling -- runs as it does on a board. Knobs: lose events (an
overflowed kernel buffer: a sequence gap), fail reads, refuse edges (ENXIO: no IRQ).
"""

from __future__ import annotations

import errno
import os
import struct
import time
from collections.abc import Callable, Iterable, Sequence

import gpiod
from gpiod.line import Value
from tablectl.drivers.gpio.backend import GpioUnavailable
from tablectl.drivers.gpio.gpiod_backend import EdgesUnsupported

# struct gpio_v2_line_event (include/uapi/linux/gpio.h): u64 timestamp_ns, u32 id,
# u32 offset, u32 seqno, u32 line_seqno, u32 padding[6].
KERNEL_EVENT = struct.Struct("=QIIII24x")
RISING_EDGE, FALLING_EDGE = 1, 2  # GPIO_V2_LINE_EVENT_RISING_EDGE / _FALLING_EDGE
KERNEL_BUFFER_EVENTS = 16  # records libgpiod reads at once by default


def kernel_event(
    timestamp_ns: int, rising: bool, offset: int, seqno: int, line_seqno: int
) -> bytes:
    return KERNEL_EVENT.pack(
        timestamp_ns, RISING_EDGE if rising else FALLING_EDGE, offset, seqno, line_seqno
    )


class FakeLineRequest:
    """A gpiod.LineRequest stand-in: a real pipe carrying kernel edge records."""

    def __init__(self, chip: FakeChip, offsets: Sequence[int], *, edges: bool) -> None:
        self._chip = chip
        self.offsets = list(offsets)
        self.edges = edges
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self.seqno = 0
        self.line_seqno = dict.fromkeys(self.offsets, 0)
        self.fail_reads = 0  # knob: the next N reads fail with EIO
        self.released = False
        self.outputs: dict[int, Value] = {}

    @property
    def fd(self) -> int:
        return self._read_fd

    def read_edge_events(self, max_events: int | None = None) -> list[gpiod.EdgeEvent]:
        if self.fail_reads > 0:
            self.fail_reads -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        count = max_events or KERNEL_BUFFER_EVENTS
        data = os.read(self._read_fd, KERNEL_EVENT.size * count)
        return [
            gpiod.EdgeEvent(event_id, timestamp, offset, seqno, line_seqno)
            for timestamp, event_id, offset, seqno, line_seqno in KERNEL_EVENT.iter_unpack(data)
        ]

    def get_values(self, lines: Iterable[int | str] | None = None) -> list[Value]:
        if self.fail_reads > 0:
            self.fail_reads -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        offsets = self.offsets if lines is None else [int(line) for line in lines]
        return [Value.ACTIVE if self._chip.logical(o) else Value.INACTIVE for o in offsets]

    def set_values(self, values: dict[int | str, Value]) -> None:
        for line, value in values.items():
            self.outputs[int(line)] = value

    def release(self) -> None:
        if not self.released:
            self.released = True
            os.close(self._read_fd)
            os.close(self._write_fd)

    def _edge(self, offset: int, rising: bool, timestamp_ns: int, lost: bool) -> None:
        self.seqno += 1
        self.line_seqno[offset] += 1
        if lost:
            return  # the kernel's buffer overflowed: this number never reaches the reader
        record = kernel_event(timestamp_ns, rising, offset, self.seqno, self.line_seqno[offset])
        os.write(self._write_fd, record)


class FakeChip:
    """A GPIO chip with named lines; inputs are driven at their physical level."""

    def __init__(
        self,
        path: str = "/dev/gpiochip0",
        *,
        names: dict[str, int] | None = None,
        lines: int = 64,
        active_low: bool = True,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.path = path
        self.names = names or {}
        self.num_lines = lines
        self.active_low = active_low
        self.clock_ns = clock_ns
        self.physical: dict[int, bool] = dict.fromkeys(range(lines), active_low)  # pulled up
        self.edges_supported = True  # knob: False answers an edge request with ENXIO
        self.lose_events = 0  # knob: the next N edges overflow the kernel's buffer
        self.inputs: FakeLineRequest | None = None
        self.outputs: FakeLineRequest | None = None
        self.closed = False

    def logical(self, offset: int) -> bool:
        return self.physical[offset] != self.active_low

    def resolve(self, lines: Sequence[int | str]) -> list[int]:
        out = []
        for line in lines:
            offset = self.names.get(line) if isinstance(line, str) else line
            if offset is None or not 0 <= offset < self.num_lines:
                raise GpioUnavailable(f"{self.path} has no line {line!r}")
            out.append(offset)
        return out

    def request_inputs(
        self, offsets: Sequence[int], *, active_low: bool, edges: bool
    ) -> FakeLineRequest:
        if edges and not self.edges_supported:
            raise EdgesUnsupported(f"{self.path}: the chip cannot report edges (ENXIO)")
        self.active_low = active_low
        self.inputs = FakeLineRequest(self, offsets, edges=edges)
        return self.inputs

    def request_outputs(self, offsets: Sequence[int]) -> FakeLineRequest:
        self.outputs = FakeLineRequest(self, offsets, edges=False)
        return self.outputs

    def drive(self, offset: int, physical: bool, *, at_ns: int | None = None) -> None:
        """Drive an input line; an edge request sees its logical edge, stamped at_ns."""
        if self.physical[offset] == physical:
            return
        self.physical[offset] = physical
        req = self.inputs
        if req is None or not req.edges or offset not in req.line_seqno:
            return
        lost = self.lose_events > 0
        self.lose_events -= int(lost)
        stamp = self.clock_ns() if at_ns is None else at_ns
        req._edge(offset, self.logical(offset), stamp, lost)

    def set_logical(self, offset: int, active: bool, *, at_ns: int | None = None) -> None:
        self.drive(offset, active != self.active_low, at_ns=at_ns)

    def lamp(self, offset: int) -> bool:
        assert self.outputs is not None
        return self.outputs.outputs.get(offset) is Value.ACTIVE

    def close(self) -> None:
        self.closed = True
