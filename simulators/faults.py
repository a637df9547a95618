"""Faults a simulated device or its line can be told to commit: the hostile knobs.

`LineFaults` is a manipulator (`bytes -> list[bytes]`, as `MemoryPort.set_manipulator` takes)
that the simulators also apply to what they write on a pty or TCP: drop, corrupt, split,
duplicate (a replay of the same bytes) or precede with noise. `ProtocolFaults` are the lies a
device can tell in the protocol itself: NAKs, event ids out of order, absurd or repeated, and
a restart that keeps its boot id (`SimulatedDevice.reboot(keep_boot_id=True)`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tablectl.drivers.reference.messages import NakReason


@dataclass
class LineFaults:
    drop: int = 0  # swallow the next N writes (the host retries)
    corrupt: int = 0  # flip the last byte (CRC) of the next N writes
    duplicate: int = 0  # send the next N writes twice
    split: int = 0  # deliver writes in pieces of this many bytes (0: whole)
    noise: bytes = b""  # line noise ahead of the next write

    def __call__(self, data: bytes) -> list[bytes]:
        if self.drop > 0:
            self.drop -= 1
            return []
        if self.corrupt > 0:
            self.corrupt -= 1
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        if self.noise:
            data, self.noise = self.noise + data, b""
        parts = [data]
        if self.duplicate > 0:
            self.duplicate -= 1
            parts = [data, data]
        if self.split > 0:
            parts = [p[i : i + self.split] for p in parts for i in range(0, len(p), self.split)]
        return parts


@dataclass
class ProtocolFaults:
    nak_next: int = 0  # answer the next N requests (of any type) with a NAK
    nak_polls: int = 0  # answer the next N POLLs with a NAK
    nak_reason: NakReason = NakReason.BUSY
    gap_next_event: bool = False  # skip one event id (an event the host can never get)
    absurd_next_event: bool = False  # give the next event the id 2^32 - 1
    reorder_events: bool = False  # list events newest first in STATUS
    ignore_acks: bool = False  # keep sending acknowledged events (replays)
    # Report the next event (of restate_kind, if set) once more after the host acknowledged
    # it, with this arg instead (a shuffler that says 52, then 51, under one event id).
    restate_next_event: int | None = None
    restate_kind: int | None = None
    # Send the next event (of reuse_kind, if set) under this id, one already taken and
    # acknowledged (a completion re-sent under the id of the other deck's): the host takes
    # it for a replay and skips it.
    reuse_id_next_event: int | None = None
    reuse_kind: int | None = None
