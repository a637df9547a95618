"""The reference shuffler's states, events and faults, and the core inputs they become. Pure."""

from __future__ import annotations

from enum import IntEnum

from tablectl.drivers.reference.messages import DeviceEvent, Status

from tablectl.core.events import (
    Event,
    ShuffleCompleted,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
)

DEVICE = "shuffler"


class ShufflerState(IntEnum):
    IDLE = 0
    SHUFFLING = 1
    READY = 2  # a shuffled deck waits to be taken
    FAULT = 3


_STATE_NAMES = {int(s): s.name.lower() for s in ShufflerState}  # (asked at every poll)


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


FAULT_NAMES: dict[int, str] = {
    FaultCode.JAM: "jam",
    FaultCode.STOPPED: "stopped",
    FaultCode.CYCLE_INCOMPLETE: "cycle-incomplete",
    FaultCode.DOOR_OPEN: "door-open",
}


def fault_name(code: int) -> str:
    return FAULT_NAMES.get(code, f"code-{code}")


class ShufflerCodec:
    device = DEVICE

    def event_input(self, event: DeviceEvent, *, stale: bool) -> Event | None:
        match event.kind:
            case EventKind.SHUFFLE_STARTED:
                return ShuffleStarted(stale=stale)
            case EventKind.SHUFFLE_COMPLETE:
                return ShuffleCompleted(card_count=event.arg, stale=stale)
            case EventKind.FAULT:
                return ShufflerFault(code=fault_name(event.arg), stale=stale)
        return None

    def is_fault_event(self, event: DeviceEvent) -> bool:
        return event.kind == EventKind.FAULT

    def fault_input(self, status: Status, *, at_connect: bool) -> Event | None:
        if status.state != ShufflerState.FAULT:
            return None
        return ShufflerFault(
            code=fault_name(status.fault), at_connect=at_connect, from_status=not at_connect
        )

    def rebooted_input(self) -> Event:
        return ShufflerRebooted()

    def state_name(self, state: int) -> str:
        return _STATE_NAMES.get(state) or f"state-{state}"

    def acting(self, state: int) -> bool:
        return state == ShufflerState.SHUFFLING

    def awaited(self, state: int) -> bool:
        return False  # a shuffle runs while a round is played: polled at the interval
