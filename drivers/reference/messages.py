"""Reference protocol messages every device shares: frames <-> typed messages. Pure.

POLL/STATUS carry each device's state and events as small integers; what they mean is the
device codec's (shuffler_codec, shoe_codec). See docs/protocols/shuffler.md and shoe.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

MAX_EVENT_ID = 0xFFFF_FFFF


class MsgType(IntEnum):
    # host -> device
    POLL = 0x01
    SHUFFLE = 0x02  # shuffler
    IDENTIFY = 0x03
    DEAL = 0x04  # shoe
    COUNT = 0x05  # shuffler: count the cards it holds
    SELF_TEST = 0x06  # shuffler
    DECK = 0x07  # shuffler: which deck it holds (a later addition: older shufflers NAK it)
    # device -> host
    STATUS = 0x81
    ACK = 0x82
    IDENT = 0x83
    COUNTED = 0x84
    SELF_TESTED = 0x85
    DECK_INFO = 0x86
    NAK = 0x8F


class NakReason(IntEnum):
    BAD_CRC = 1
    BAD_LENGTH = 2
    UNKNOWN_TYPE = 3
    BUSY = 4
    ILLEGAL_IN_STATE = 5
    BAD_PARAMETER = 6


_TYPE_NAMES = {int(t): t.name for t in MsgType}  # (every request names its type)


def type_name(mtype: int) -> str:
    return _TYPE_NAMES.get(mtype) or f"type {mtype:#04x}"


class ProtocolError(Exception):
    """A verified frame whose payload does not decode; carries the payload as evidence."""

    def __init__(self, message: str, payload: bytes) -> None:
        super().__init__(f"{message} (payload {payload.hex()})")
        self.payload = payload


# Named tuples, not frozen dataclasses: three STATUS are built at every poll (the device's,
# its reply's, the host's reading), and a tuple is built in a third of the time.


class DeviceEvent(NamedTuple):
    event_id: int
    kind: int
    arg: int


class Status(NamedTuple):
    state: int
    fault: int
    card_count: int
    expected_count: int
    boot_id: int
    events: tuple[DeviceEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the device says it is (IDENT): a swapped device has another serial number."""

    model: str
    serial_number: str
    firmware: str


_STATUS = struct.Struct("<BBBBIB")
_EVENT = struct.Struct("<IBB")
_POLL = struct.Struct("<II")  # boot_id the ack refers to, last event id the host has journaled


def encode_poll(boot_id: int, ack_event_id: int) -> bytes:
    """The ack names the boot it refers to, so a rebooted device never drops its new events."""
    return _POLL.pack(boot_id, ack_event_id)


def decode_poll(payload: bytes) -> tuple[int, int]:
    if len(payload) != _POLL.size:
        raise ProtocolError(f"POLL payload must be {_POLL.size} bytes", payload)
    boot_id, ack = _POLL.unpack(payload)
    return int(boot_id), int(ack)


def encode_status(status: Status) -> bytes:
    out = _STATUS.pack(
        status.state,
        status.fault,
        status.card_count,
        status.expected_count,
        status.boot_id,
        len(status.events),
    )
    for ev in status.events:
        out += _EVENT.pack(ev.event_id, ev.kind, ev.arg)
    return out


def decode_status(payload: bytes) -> Status:
    if len(payload) < _STATUS.size:
        raise ProtocolError("STATUS payload too short", payload)
    state, fault, count, expected, boot_id, n = _STATUS.unpack_from(payload)
    if len(payload) != _STATUS.size + n * _EVENT.size:
        raise ProtocolError(f"STATUS announces {n} events but its length disagrees", payload)
    if not n:
        return Status(state, fault, count, expected, boot_id)  # most polls: nothing new
    events = tuple(
        DeviceEvent._make(_EVENT.unpack_from(payload, _STATUS.size + i * _EVENT.size))
        for i in range(n)
    )
    return Status(state, fault, count, expected, boot_id, events)


def encode_ident(identity: Identity) -> bytes:
    out = b""
    for text in (identity.model, identity.serial_number, identity.firmware):
        raw = text.encode()
        if len(raw) > 64:
            raise ValueError(f"identity field {text!r} is longer than 64 bytes")
        out += bytes([len(raw)]) + raw
    return out


def decode_ident(payload: bytes) -> Identity:
    fields: list[str] = []
    at = 0
    for _ in range(3):
        if at >= len(payload):
            raise ProtocolError("IDENT payload too short", payload)
        n = payload[at]
        raw = payload[at + 1 : at + 1 + n]
        if len(raw) != n or n > 64:
            raise ProtocolError("IDENT field length disagrees", payload)
        try:
            text = raw.decode()
        except UnicodeDecodeError as exc:
            raise ProtocolError("IDENT field is not UTF-8", payload) from exc
        if not text.isprintable():
            raise ProtocolError("IDENT field is not printable", payload)
        fields.append(text)
        at += 1 + n
    if at != len(payload):
        raise ProtocolError("IDENT payload has trailing bytes", payload)
    if not fields[1]:
        raise ProtocolError("IDENT has no serial number", payload)
    return Identity(*fields)


MAX_REPORT_BYTES = 200
_COUNTED = struct.Struct("<BB")  # cards counted, cards expected


def encode_counted(counted: int, expected: int) -> bytes:
    return _COUNTED.pack(counted, expected)


def decode_counted(payload: bytes) -> tuple[int, int]:
    if len(payload) != _COUNTED.size:
        raise ProtocolError(f"COUNTED payload must be {_COUNTED.size} bytes", payload)
    counted, expected = _COUNTED.unpack(payload)
    return int(counted), int(expected)


MAX_DECK_FIELD_BYTES = 32


def encode_deck_info(deck: tuple[str, str] | None) -> bytes:
    """DECK_INFO: the deck's id and back colour, each length-prefixed; none: two empty fields."""
    deck_id, back = deck or ("", "")
    out = b""
    for text in (deck_id, back):
        raw = text.encode()
        if len(raw) > MAX_DECK_FIELD_BYTES:
            raise ValueError(f"deck field {text!r} is longer than {MAX_DECK_FIELD_BYTES} bytes")
        out += bytes([len(raw)]) + raw
    return out


def decode_deck_info(payload: bytes) -> tuple[str, str] | None:
    """(deck id, back colour) of the deck the shuffler holds, or None: it holds none it knows."""
    fields: list[str] = []
    at = 0
    for _ in range(2):
        if at >= len(payload) or payload[at] > MAX_DECK_FIELD_BYTES:
            raise ProtocolError("DECK_INFO payload too short or a field too long", payload)
        n = payload[at]
        raw = payload[at + 1 : at + 1 + n]
        if len(raw) != n:
            raise ProtocolError("DECK_INFO field runs past the payload", payload)
        try:
            text = raw.decode()
        except UnicodeDecodeError as exc:
            raise ProtocolError("DECK_INFO field is not UTF-8", payload) from exc
        if not text.isprintable():
            raise ProtocolError("DECK_INFO field is not printable", payload)
        fields.append(text)
        at += 1 + n
    if at != len(payload):
        raise ProtocolError("DECK_INFO has bytes past its two fields", payload)
    deck_id, back = fields
    if not deck_id and not back:
        return None
    if not deck_id or not back:
        raise ProtocolError("DECK_INFO gives an id without a back colour, or the reverse", payload)
    return deck_id, back


def encode_self_tested(passed: bool, report: str) -> bytes:
    raw = report.encode()
    if len(raw) > MAX_REPORT_BYTES:
        raise ValueError(f"self-test report is longer than {MAX_REPORT_BYTES} bytes")
    return bytes([1 if passed else 0, len(raw)]) + raw


def decode_self_tested(payload: bytes) -> tuple[bool, str]:
    """(passed, the device's report); anything but 0 or 1 for passed is not believed."""
    if len(payload) < 2 or len(payload) != 2 + payload[1] or payload[1] > MAX_REPORT_BYTES:
        raise ProtocolError("SELF_TESTED length disagrees", payload)
    if payload[0] not in (0, 1):
        raise ProtocolError("SELF_TESTED result is neither 0 nor 1", payload)
    try:
        report = payload[2:].decode()
    except UnicodeDecodeError as exc:
        raise ProtocolError("SELF_TESTED report is not UTF-8", payload) from exc
    if not report.isprintable():
        raise ProtocolError("SELF_TESTED report is not printable", payload)
    return payload[0] == 1, report
