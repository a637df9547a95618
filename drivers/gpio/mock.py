"""The mock backend: edges from a script or a simulated table, not from hardware.

`MockBackend` lives in the daemon's process: a test scripts edges into it (bounce bursts,
exact ties, out-of-order arrival, sequence gaps), or a simulated table in the same process
(the demo) hands it the edges its chips and button make. `SimulatorLinkBackend` is the same
backend across processes: it connects to `tablectl simulate table`'s Unix socket, which
sends the edges (stamped by the simulator on the shared CLOCK_MONOTONIC, numbered like the
kernel's) as JSON lines and receives the lamps. The wire messages are defined here, once,
for both ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError
from tablectl.drivers.gpio.backend import (
    BackendInfo,
    Edge,
    EdgeSink,
    GpioUnavailable,
    Levels,
    lines_of,
)

from tablectl.util.backoff import Backoff
from tablectl.util.reconnect import Permanent, Reconnector

log = structlog.get_logger(__name__)
HELLO_TIMEOUT_S = 5.0
MAX_LINE_BYTES = 4096


class MockBackend:
    """A fake backend on the loop: edges are handed in, lamps are recorded."""

    def __init__(self, seats: int, *, where: str = "in-process") -> None:
        self.info = BackendInfo(
            backend="mock", where=where, polled=False, resolution_ns=1, kernel_sequence=True
        )
        self.levels: dict[int, bool] = dict.fromkeys(lines_of(seats), False)
        self.lamps: dict[int, bool] = dict.fromkeys(range(1, seats + 1), False)
        self.on_lamp: Callable[[int, bool], None] | None = None
        self.last_seq: int | None = None
        self._sink: EdgeSink | None = None
        self._pending: list[Edge] = []

    async def open(self) -> Levels:
        return dict(self.levels)

    async def run(self, sink: EdgeSink) -> None:
        self._sink = sink
        if self._pending:
            pending, self._pending = self._pending, []
            sink.edges(pending)
        try:
            await asyncio.get_running_loop().create_future()  # until cancelled
        finally:
            self._sink = None

    def deliver(self, *edges: Edge) -> None:
        """Edges, in the order given (which need not be their stamps' order)."""
        for edge in edges:
            self.levels[edge.line] = edge.level
        if self._sink is None:
            self._pending.extend(edges)
        else:
            self._sink.edges(edges)

    def fail(self, reason: str) -> None:
        """A failed read, as a backend reports one."""
        if self._sink is not None:
            self._sink.fault(reason)

    def read_levels(self) -> Levels | None:
        return dict(self.levels)

    def set_lamp(self, seat: int, on: bool) -> None:
        self.lamps[seat] = on
        if self.on_lamp is not None:
            self.on_lamp(seat, on)

    def close(self) -> None:
        self._sink = None


# --- the wire between `tablectl simulate table` and the daemon's mock backend -------------


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class EdgeMsg(_Msg):
    line: int
    level: bool
    t_ns: int
    seq: int | None
    resolution_ns: int

    def edge(self) -> Edge:
        return Edge(self.line, self.level, self.t_ns, self.seq, self.resolution_ns)


class HelloMsg(_Msg):
    seats: int
    levels: dict[str, bool]  # JSON keys: the logical line, as text
    seq: int | None
    t_ns: int


class FromTable(_Msg):
    """One line from the simulated table: a hello on connect, then edges."""

    hello: HelloMsg | None = None
    edge: EdgeMsg | None = None


class LampMsg(_Msg):
    seat: int
    on: bool


class FromDaemon(_Msg):
    lamp: LampMsg


def edge_line(edge: Edge) -> bytes:
    msg = FromTable(
        edge=EdgeMsg(
            line=edge.line,
            level=edge.level,
            t_ns=edge.t_ns,
            seq=edge.seq,
            resolution_ns=edge.resolution_ns,
        )
    )
    return msg.model_dump_json(exclude_none=True).encode() + b"\n"


def hello_line(seats: int, levels: Levels, seq: int | None, t_ns: int) -> bytes:
    hello = HelloMsg(seats=seats, levels={str(k): v for k, v in levels.items()}, seq=seq, t_ns=t_ns)
    return FromTable(hello=hello).model_dump_json(exclude_none=True).encode() + b"\n"


def _levels(hello: HelloMsg) -> dict[int, bool]:
    return {int(k): v for k, v in hello.levels.items() if k.isdigit()}


class NotThisTable(ConnectionError, Permanent):
    """The socket answers, but not as a simulated table of this many seats."""


class SimulatorLinkBackend:
    """The mock backend across processes: edges from a simulated table's Unix socket.

    Reconnects through the one reconnect component (util/reconnect.py): a table that is not
    there yet is retried soon and quietly, one of another size at the longest backoff."""

    def __init__(self, path: Path, seats: int, *, backoff: Backoff | None = None) -> None:
        self.path = path
        self.seats = seats
        self.info = BackendInfo(
            backend="mock",
            where=f"simulated table on {path}",
            polled=False,
            resolution_ns=1,
            kernel_sequence=True,
        )
        self.reconnector: Reconnector[HelloMsg] = Reconnector(
            name="simulated table",
            connect=self._connect,
            serve=self._serve,
            close=self._close,
            backoff=backoff or Backoff(initial_s=0.2, max_s=5.0),
            retry_on=(OSError,),
        )
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._opened: HelloMsg | None = None  # open()'s hello: its levels are the daemon's
        self._sink: EdgeSink | None = None
        self.last_seq: int | None = None
        self.bad_lines = 0

    async def _connect(self) -> HelloMsg:
        if self._opened is not None:  # the connection open() made is the first one
            return self._opened
        reader, writer = await asyncio.open_unix_connection(str(self.path), limit=MAX_LINE_BYTES)
        try:
            async with asyncio.timeout(HELLO_TIMEOUT_S):
                msg = FromTable.model_validate_json(await reader.readline())
        except (TimeoutError, ValidationError, ValueError) as exc:
            writer.close()
            raise ConnectionError(f"the simulated table did not say hello: {exc}") from None
        if msg.hello is None or msg.hello.seats != self.seats:
            writer.close()
            raise NotThisTable(f"{self.path} is not a simulated {self.seats}-seat table")
        self._reader, self._writer = reader, writer
        return msg.hello

    async def open(self) -> Levels:
        try:
            hello = await self._connect()
        except NotThisTable as exc:
            raise GpioUnavailable(f"{exc}: is table.seats the simulator's?") from None
        except OSError as exc:
            raise GpioUnavailable(
                f"no simulated table on {self.path} ({exc.strerror or exc}): start "
                "`tablectl simulate table --config FILE` first"
            ) from None
        self.last_seq = hello.seq
        self._opened = hello
        return _levels(hello)

    async def run(self, sink: EdgeSink) -> None:
        self._sink = sink
        await self.reconnector.run()

    async def _serve(self, hello: HelloMsg) -> None:
        sink, reader = self._sink, self._reader
        assert sink is not None and reader is not None
        if hello is self._opened:
            self._opened = None  # the daemon took these levels from open()
        else:
            sink.resync(_levels(hello), hello.t_ns, hello.seq)
        while True:
            try:
                line = await reader.readline()
            except (ConnectionError, ValueError) as exc:  # ValueError: an over-long line
                line = b""
                log.warning("simulated table link broken", error=str(exc))
            if not line:
                sink.fault(f"the link to the simulated table on {self.path} was lost")
                raise ConnectionError(f"the link to the simulated table on {self.path} was lost")
            self._take(line, sink)

    async def _close(self, hello: HelloMsg) -> None:
        self._drop()

    def _take(self, line: bytes, sink: EdgeSink) -> None:
        try:
            msg = FromTable.model_validate_json(line)
        except ValidationError as exc:
            self.bad_lines += 1
            log.warning("malformed line from the simulated table", error=str(exc.errors()[0]))
            return
        if msg.edge is not None:
            sink.edges([msg.edge.edge()])
        elif msg.hello is not None:
            sink.resync(_levels(msg.hello), msg.hello.t_ns, msg.hello.seq)

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    def read_levels(self) -> Levels | None:
        return None  # known again at the next hello

    def set_lamp(self, seat: int, on: bool) -> None:
        if self._writer is None or self._writer.is_closing():
            return
        msg = FromDaemon(lamp=LampMsg(seat=seat, on=on))
        with contextlib.suppress(ConnectionError):
            self._writer.write(msg.model_dump_json().encode() + b"\n")

    def close(self) -> None:
        self._drop()


def lamp_message(line: bytes) -> LampMsg | None:
    """A daemon's lamp message, or None when the line is not one (logged by the caller)."""
    try:
        return FromDaemon.model_validate_json(line).lamp
    except ValidationError:
        return None
