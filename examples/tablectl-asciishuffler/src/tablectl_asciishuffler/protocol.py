"""The ACME line shuffler's wire protocol: ASCII lines, an additive checksum. Pure.

A line is `SEQ VERB ARG...*CS\\r\\n`: SEQ a decimal 0..999 that wraps from 999 to 0, CS the
sum of the bytes before `*`, modulo 256, as two upper-case hex digits. The host asks, the
device answers with the same SEQ; a host that hears nothing sends the same line again and the
device answers it from its cache without doing it twice. Unlike tablectl's reference protocol
(binary frames, CRC-16, SEQ 1..255), and also:

- boot: a power-cycle counter the device keeps (it goes up by one at every power-up); a
  device announces a power-up unasked with `0 RB BOOT`;
- events: `ST BOOT ACK` asks for the status and drops the events up to ACK of that boot; the
  answer is `SEQ ST BOOT STATE FAULT COUNT EVENT...`, each event `ID:KIND[:ARG]`, ids from 1
  in each boot;
- refusals: `SEQ NO REASON` (busy, fault, unknown).

Host verbs: HI (identify: `SEQ ID MODEL SERIAL FIRMWARE`), ST, SH (shuffle: `SEQ OK`),
CT (count: `SEQ CT COUNTED EXPECTED`), TS (self-test: `SEQ TS PASS|FAIL WORDS`).
"""

from __future__ import annotations

from dataclasses import dataclass

SEQ_MAX = 999
MAX_LINE = 512  # a longer line is garbage: dropped
STATES = ("idle", "busy", "ready", "fault")
KINDS = {"STA": 1, "END": 2, "FLT": 3}  # the core's numbers for its refusals and conflicts
FAULTS = {"JAM": "jam", "DOOR": "door-open", "STOP": "stopped", "-": None}


class LineError(ValueError):
    """A line that is not the protocol's (checksum, form): dropped, counted."""


def checksum(body: bytes) -> int:
    return sum(body) % 256


def encode(seq: int, verb: str, *args: object) -> bytes:
    body = " ".join([str(seq), verb, *(str(a) for a in args)]).encode("ascii")
    return body + b"*%02X\r\n" % checksum(body)


@dataclass(frozen=True, slots=True)
class Line:
    seq: int
    verb: str
    args: tuple[str, ...]


def decode(raw: bytes) -> Line:
    """One line without its end of line; raises LineError."""
    body, star, cs = raw.rstrip(b"\r").rpartition(b"*")
    if not star or len(cs) != 2:
        raise LineError(f"no checksum: {raw[:40]!r}")
    try:
        if int(cs, 16) != checksum(body):
            raise LineError(f"bad checksum: {raw[:40]!r}")
        words = body.decode("ascii").split()
    except (ValueError, UnicodeDecodeError):
        raise LineError(f"not ASCII hex: {raw[:40]!r}") from None
    if len(words) < 2 or not words[0].isdigit() or int(words[0]) > SEQ_MAX:
        raise LineError(f"no sequence number: {raw[:40]!r}")
    return Line(int(words[0]), words[1], tuple(words[2:]))


class LineReader:
    """Bytes in, lines out: a line longer than MAX_LINE is dropped to its end."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.bad_lines = 0

    def feed(self, data: bytes) -> list[Line]:
        self._buf += data
        lines = []
        while (end := self._buf.find(b"\n")) >= 0:
            raw = bytes(self._buf[:end])
            del self._buf[: end + 1]
            if not raw.strip():
                continue
            try:
                lines.append(decode(raw))
            except LineError:
                self.bad_lines += 1
        if len(self._buf) > MAX_LINE:
            self._buf.clear()
            self.bad_lines += 1
        return lines


@dataclass(frozen=True, slots=True)
class Event:
    event_id: int
    kind: str  # STA, END, FLT
    arg: str = ""

    def word(self) -> str:
        return f"{self.event_id}:{self.kind}" + (f":{self.arg}" if self.arg else "")


@dataclass(frozen=True, slots=True)
class Status:
    boot: int
    state: str
    fault: str  # a FAULTS key
    count: int
    events: tuple[Event, ...]


def encode_status(seq: int, s: Status) -> bytes:
    return encode(seq, "ST", s.boot, s.state, s.fault, s.count, *(e.word() for e in s.events))


def decode_status(line: Line) -> Status:
    if line.verb != "ST" or len(line.args) < 4:
        raise LineError(f"not a status: {line}")
    boot, state, fault, count, *words = line.args
    if state not in STATES or fault not in FAULTS:
        raise LineError(f"unknown state or fault: {line}")
    events = []
    for word in words:
        parts = word.split(":")
        if len(parts) not in (2, 3) or not parts[0].isdigit() or parts[1] not in KINDS:
            raise LineError(f"not an event: {word!r}")
        events.append(Event(int(parts[0]), parts[1], parts[2] if len(parts) == 3 else ""))
    try:
        return Status(int(boot), state, fault, int(count), tuple(events))
    except ValueError:
        raise LineError(f"not a number: {line}") from None


def next_seq(seq: int) -> int:
    return 0 if seq >= SEQ_MAX else seq + 1
