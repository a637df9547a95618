"""What every transport provides: open a connection, read and write bytes, close.

A transport knows nothing of frames. Its errors say whether the device can be reached:
`TransportUnavailable` (cannot be opened now: absent, busy, unplugged) and `TransportClosed`
(an open connection ended). Both are `OSError`s, so a reconnect loop retries them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TextIO, runtime_checkable


class TransportError(OSError):
    """The device cannot be talked to through this transport."""


class TransportUnavailable(TransportError):
    """The connection cannot be opened now (no such device, busy, unplugged)."""


class TransportClosed(TransportError):
    """An open connection ended (the port closed, the device was unplugged)."""


class Connection(Protocol):
    @property
    def description(self) -> str: ...

    async def read(self) -> bytes:
        """At least one byte; raises TransportClosed when the connection is over."""
        ...

    def write(self, data: bytes) -> None:
        """Queue bytes for the device; raises TransportClosed when the connection is over."""
        ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class Pushing(Protocol):
    """A connection that can hand what it receives to a callback, on the loop, the moment
    it arrives: no task is woken to read it. read() then only ends the connection."""

    def push_to(self, receive: Callable[[bytes], None]) -> None: ...


class Connector(Protocol):
    """Opens connections to one device's port, again and again (the reconnect loop's side)."""

    @property
    def description(self) -> str: ...

    async def connect(self) -> Connection:
        """A new connection, or TransportUnavailable."""
        ...


class StreamConnection:
    """A connection over asyncio streams (serial ports and TCP sockets)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        description: str,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._reader, self._writer = reader, writer
        self._description = description
        self._on_close = on_close

    @property
    def description(self) -> str:
        return self._description

    async def read(self) -> bytes:
        try:
            data = await self._reader.read(4096)
        except OSError as exc:
            raise TransportClosed(f"{self._description}: {exc}") from exc
        if not data:
            raise TransportClosed(f"{self._description} closed")
        return data

    def write(self, data: bytes) -> None:
        if self._writer.is_closing():
            raise TransportClosed(f"{self._description} closed")
        self._writer.write(data)

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except OSError as exc:
            raise TransportClosed(f"{self._description}: {exc}") from exc

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()  # the port (and its lock) released for real
        if self._on_close is not None:
            self._on_close()


class TraceWriter:
    """Records the bytes on a link and the core inputs, with times, as a field trace.

    One line per item: `<ms> <tag> <text>`; tags `<` (from the device), `>` (to the device),
    `input` (a core input as JSON), `#` (a comment). tests/traces/*.trace are such files.
    """

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self._out = out
        self._clock = clock
        self._t0 = clock()

    @classmethod
    def open(cls, path: Path, header: str) -> TraceWriter:
        """Append to a trace file, under a header saying who and when (gpsd's style)."""
        trace = cls(path.open("a", encoding="utf-8"))
        trace.comment(f"{header} at {datetime.now(UTC).isoformat(timespec='seconds')}")
        return trace

    def close(self) -> None:
        self._out.close()

    def _line(self, tag: str, text: str) -> None:
        ms = int((self._clock() - self._t0) * 1000)
        self._out.write(f"{ms} {tag} {text}\n")
        self._out.flush()

    def comment(self, text: str) -> None:
        self._line("#", text)

    def received(self, data: bytes) -> None:
        self._line("<", data.hex())

    def sent(self, data: bytes) -> None:
        self._line(">", data.hex())

    def input(self, json_text: str) -> None:
        self._line("input", json_text)


class TracedConnection:
    """A connection whose bytes are also written to a trace."""

    def __init__(self, inner: Connection, trace: TraceWriter) -> None:
        self._inner = inner
        self._trace = trace

    @property
    def description(self) -> str:
        return self._inner.description

    async def read(self) -> bytes:
        data = await self._inner.read()
        self._trace.received(data)
        return data

    def write(self, data: bytes) -> None:
        self._trace.sent(data)
        self._inner.write(data)

    async def drain(self) -> None:
        await self._inner.drain()

    async def close(self) -> None:
        await self._inner.close()
