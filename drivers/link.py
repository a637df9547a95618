"""Host side of the reference protocol: request/response matching, retries, counters.

One request is outstanding at a time; its response carries the same SEQ. A silent device is
asked again with the *same* SEQ, which the device answers from its reply cache without
executing twice, so commands such as SHUFFLE are safe to retry.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

import structlog
from tablectl.drivers.framing import Frame, FrameParser
from tablectl.drivers.protocol import MsgType, NakReason

log = structlog.get_logger(__name__)


class LinkError(Exception):
    """The device cannot be reached or did not answer as the protocol says."""


class LinkTimeout(LinkError):
    def __init__(self, request: Frame, attempts: int) -> None:
        super().__init__(
            f"no reply to {MsgType(request.type).name} seq {request.seq} after {attempts} tries"
        )
        self.request = request


class NakError(LinkError):
    def __init__(self, request: Frame, reason: int) -> None:
        name = NakReason(reason).name if reason in NakReason._value2member_map_ else reason
        super().__init__(f"device refused {MsgType(request.type).name}: {name}")
        self.request = request
        self.reason = reason


@dataclass
class LinkCounters:
    requests: int = 0
    retransmits: int = 0
    timeouts: int = 0
    naks: int = 0
    unsolicited: int = 0  # verified frames that answer nothing we asked


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Link:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        address: int = 1,
        response_timeout_ms: int = 250,
        retries: int = 3,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._address = address
        self._timeout_s = response_timeout_ms / 1000
        self._retries = retries
        self._seq = 0
        self._lock = asyncio.Lock()
        self._pending: tuple[int, asyncio.Future[Frame]] | None = None
        self.parser = FrameParser()
        self.counters = LinkCounters()

    def stats(self) -> dict[str, Any]:
        return {**asdict(self.counters), **asdict(self.parser.counters)}

    async def read_forever(self) -> None:
        """Feed received bytes to the parser and hand replies to the waiting request."""
        while True:
            data = await self._reader.read(1024)
            if not data:
                raise LinkError("the serial port closed")
            for frame in self.parser.feed(data, monotonic_ms()):
                self._dispatch(frame)

    def _dispatch(self, frame: Frame) -> None:
        pending = self._pending
        if pending is None or frame.seq != pending[0] or frame.addr != self._address:
            self.counters.unsolicited += 1
            log.debug("unsolicited frame", seq=frame.seq, type=frame.type)
            return
        if not pending[1].done():
            pending[1].set_result(frame)

    async def request(self, mtype: MsgType, payload: bytes = b"") -> Frame:
        async with self._lock:
            self._seq = (
                self._seq % 255 + 1
            )  # 1..255; 0 is never used so a fresh device has no match
            frame = Frame(self._address, self._seq, mtype, payload)
            wire = frame.encode()
            self.counters.requests += 1
            loop = asyncio.get_running_loop()
            try:
                for attempt in range(self._retries + 1):
                    if attempt:
                        self.counters.retransmits += 1
                    future: asyncio.Future[Frame] = loop.create_future()
                    self._pending = (frame.seq, future)
                    self._writer.write(wire)
                    await self._writer.drain()
                    try:
                        reply = await asyncio.wait_for(future, self._timeout_s)
                    except TimeoutError:
                        continue
                    if reply.type == MsgType.NAK:
                        self.counters.naks += 1
                        raise NakError(frame, reply.payload[0] if reply.payload else 0)
                    return reply
            finally:
                self._pending = None
            self.counters.timeouts += 1
            raise LinkTimeout(frame, self._retries + 1)
