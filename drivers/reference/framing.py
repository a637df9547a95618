"""Reference wire framing: bytes <-> verified frames. Pure; no I/O, no clock.

Frame: STX | VER | ADDR | SEQ | TYPE | LEN (u16 LE) | PAYLOAD | CRC (u16 LE).
The CRC is CRC-16/CCITT-FALSE over every byte after STX up to the end of the payload.
See docs/protocols/shuffler.md and docs/protocols/shoe.md.
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

STX = 0x02
VERSION = 1
MAX_PAYLOAD = 512
HEADER = struct.Struct("<BBBBH")  # VER, ADDR, SEQ, TYPE, LEN
HEADER_LEN = 1 + HEADER.size  # STX included
CRC = struct.Struct("<H")
_STX = bytes([STX])
CRC_LEN = 2
MAX_FRAME = HEADER_LEN + MAX_PAYLOAD + CRC_LEN
INTER_BYTE_GAP_MS = 50


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF); check value 0x29B1 for b"123456789"."""
    return binascii.crc_hqx(data, 0xFFFF)


class Frame(NamedTuple):
    """A verified frame's fields (a named tuple, not a frozen dataclass: four are built at
    every poll, and a tuple is built in a third of the time)."""

    addr: int
    seq: int
    type: int
    payload: bytes = b""

    def encode(self) -> bytes:
        if len(self.payload) > MAX_PAYLOAD:
            raise ValueError(f"payload of {len(self.payload)} bytes exceeds {MAX_PAYLOAD}")
        body = HEADER.pack(VERSION, self.addr, self.seq, self.type, len(self.payload))
        body += self.payload
        return _STX + body + CRC.pack(crc16(body))


@dataclass(slots=True)
class ParserCounters:
    frames: int = 0
    bytes_in: int = 0
    bytes_dropped: int = 0
    bad_crc: int = 0
    bad_header: int = 0
    gap_aborts: int = 0


@dataclass
class FrameParser:
    """Feeds bytes, yields frames whose CRC verified. Garbage is dropped a byte at a time.

    On any failure (version, length, CRC) one byte is dropped and the buffer rescanned
    for the next STX, so a corrupt frame never hides the valid one behind it.
    """

    counters: ParserCounters = field(default_factory=ParserCounters)
    _buf: bytearray = field(default_factory=bytearray)
    _last_byte_ms: int | None = None

    def feed(self, data: bytes, now_ms: int | None = None) -> list[Frame]:
        """Frames completed by these bytes. now_ms (monotonic) enables the inter-byte gap rule."""
        frames: list[Frame] = []
        if (
            now_ms is not None
            and self._buf
            and self._last_byte_ms is not None
            and now_ms - self._last_byte_ms > INTER_BYTE_GAP_MS
        ):
            frames += self._abandon_partial()
        if now_ms is not None:
            self._last_byte_ms = now_ms
        self.counters.bytes_in += len(data)
        self._buf += data
        while True:
            frame = self._next_frame()
            if frame is None:
                return frames
            frames.append(frame)

    @property
    def partial(self) -> bool:
        """Bytes of a frame not yet complete are held."""
        return bool(self._buf)

    def expire(self, now_ms: int) -> list[Frame]:
        """The line has been quiet until now_ms: a partial frame held longer than the
        inter-byte gap is abandoned, and the frames its false header hid are returned (else
        they would wait for the next bytes to arrive: a reply late by one request)."""
        if (
            self._buf
            and self._last_byte_ms is not None
            and now_ms - self._last_byte_ms > INTER_BYTE_GAP_MS
        ):
            return self._abandon_partial()
        return []

    def _abandon_partial(self) -> list[Frame]:
        """The line went quiet mid-frame: that start byte was false (or the frame is lost).

        Rescan what followed it, since a false header with a long length can hide whole
        valid frames; whatever is still incomplete after that is dropped.
        """
        self.counters.gap_aborts += 1
        frames: list[Frame] = []
        while self._buf:
            self._drop(1)
            while (frame := self._next_frame()) is not None:
                frames.append(frame)
        return frames

    def _drop(self, n: int) -> None:
        del self._buf[:n]
        self.counters.bytes_dropped += n

    def _next_frame(self) -> Frame | None:
        buf = self._buf
        while buf:
            start = buf.find(STX)
            if start < 0:
                self._drop(len(buf))
                return None
            if start:
                self._drop(start)
            if len(buf) < HEADER_LEN:
                return None
            version, addr, seq, ftype, length = HEADER.unpack_from(buf, 1)
            if version != VERSION or length > MAX_PAYLOAD:
                self.counters.bad_header += 1
                self._drop(1)
                continue
            total = HEADER_LEN + length + CRC_LEN
            if len(buf) < total:
                return None
            body = bytes(buf[1 : HEADER_LEN + length])
            (crc,) = CRC.unpack_from(buf, HEADER_LEN + length)
            if crc != crc16(body):
                self.counters.bad_crc += 1
                self._drop(1)
                continue
            payload = bytes(buf[HEADER_LEN : HEADER_LEN + length])
            del buf[:total]
            self.counters.frames += 1
            return Frame(addr=addr, seq=seq, type=ftype, payload=payload)
        return None
