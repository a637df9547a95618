"""Reference shuffler protocol: frames <-> typed messages. Pure; shared by driver and simulator."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum


class MsgType(IntEnum):
    # host -> device
    POLL = 0x01
    SHUFFLE = 0x02
    IDENTIFY = 0x03
    # device -> host
    STATUS = 0x81
    ACK = 0x82
    IDENT = 0x83
    NAK = 0x8F


class NakReason(IntEnum):
    BAD_CRC = 1
    BAD_LENGTH = 2
    UNKNOWN_TYPE = 3
    BUSY = 4
    ILLEGAL_IN_STATE = 5
    BAD_PARAMETER = 6


class ShufflerState(IntEnum):
    IDLE = 0
    SHUFFLING = 1
    READY = 2  # a shuffled deck waits to be taken
    FAULT = 3


class EventKind(IntEnum):
    SHUFFLE_STARTED = 1
    SHUFFLE_COMPLETE = 2  # arg: cards counted
    FAULT = 3  # arg: FaultCode


class FaultCode(IntEnum):
    NONE = 0
    JAM = 1
    STOPPED = 2  # stopped mid-shuffle
    CYCLE_INCOMPLETE = 3
    DOOR_OPEN = 4


class ProtocolError(Exception):
    """A verified frame whose payload does not decode; carries the frame's bytes as evidence."""

    def __init__(self, message: str, payload: bytes) -> None:
        super().__init__(f"{message} (payload {payload.hex()})")
        self.payload = payload


@dataclass(frozen=True, slots=True)
class DeviceEvent:
    event_id: int
    kind: EventKind
    arg: int


@dataclass(frozen=True, slots=True)
class Status:
    state: ShufflerState
    fault: FaultCode
    card_count: int
    expected_count: int
    boot_id: int
    events: tuple[DeviceEvent, ...]


_STATUS = struct.Struct("<BBBBIB")
_EVENT = struct.Struct("<IBB")
_POLL = struct.Struct("<II")  # boot_id the ack refers to, last event id the host has taken


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
        raise ProtocolError(f"STATUS announces {n} events but length disagrees", payload)
    try:
        events = tuple(
            DeviceEvent(eid, EventKind(kind), arg)
            for eid, kind, arg in (
                _EVENT.unpack_from(payload, _STATUS.size + i * _EVENT.size) for i in range(n)
            )
        )
        return Status(ShufflerState(state), FaultCode(fault), count, expected, boot_id, events)
    except ValueError as exc:
        raise ProtocolError(f"STATUS has an unknown code: {exc}", payload) from exc
