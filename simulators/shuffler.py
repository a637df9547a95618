"""Simulated automated card shuffler: the device side of the reference protocol.

It shuffles a real 52-card deck, counts it, and speaks the production codec (in-process, on a
pseudo-terminal or over TCP). Knobs provoke every case: jams and incomplete cycles, a missing
card, a fault already showing at connect, reboots, and the line and protocol faults of
simulators/faults.py.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from tablectl.drivers.reference.framing import Frame
from tablectl.drivers.reference.messages import (
    Identity,
    MsgType,
    NakReason,
    Status,
    encode_counted,
    encode_deck_info,
    encode_self_tested,
)
from tablectl.drivers.reference.shuffler_codec import EventKind, FaultCode, ShufflerState
from tablectl.simulators.device import SimulatedDevice

from tablectl.rules.cards import Card, full_deck

IDENTITY = Identity("tablectl-sim-shuffler", "SHF-0001", "1.0")
DECK_SIZE = len(full_deck())  # what a count expects (the deck built once, not at every poll)


@dataclass
class ShuffleFaults:
    jam_next_shuffle: bool = False
    incomplete_next_shuffle: bool = False
    stop_next_shuffle: bool = False


class ShufflerSimulator(SimulatedDevice):
    def __init__(
        self,
        *,
        shuffle_ms: int = 200,
        rng: random.Random | None = None,
        address: int = 1,
        identity: Identity = IDENTITY,
    ) -> None:
        self.shuffle_ms = shuffle_ms
        self.knobs = ShuffleFaults()
        self.deck: list[Card] = list(full_deck())
        self.shuffles = 0
        # Set to a report to make the self-test fail with it (a dirty sensor, say).
        self.self_test_failure: str | None = None
        # The decks it alternates, (id, back colour), reported to DECK; None: a shuffler that
        # knows no deck identity (it NAKs DECK as an unknown type, as older ones do).
        self.decks: list[tuple[str, str]] | None = None
        self.loaded: tuple[str, str] | None = None  # the deck of the last shuffle
        super().__init__(identity, address=address, rng=rng)

    def _reboot_state(self, *, keep_boot_id: bool = False) -> None:
        super()._reboot_state(keep_boot_id=keep_boot_id)
        self.state = ShufflerState.IDLE
        self.fault = FaultCode.NONE
        self.last_count = 0

    # --- knobs --------------------------------------------------------------------------

    def remove_card(self) -> Card:
        """Lose a card from the deck (it fell on the floor): the next count is 51."""
        return self.deck.pop(self.rng.randrange(len(self.deck)))

    def load_full_deck(self) -> None:
        self.deck = list(full_deck())

    def fail(self, code: FaultCode, *, as_event: bool = True) -> None:
        """Go into fault now (as_event False: the fault only shows in STATUS)."""
        self.state, self.fault = ShufflerState.FAULT, code
        if as_event:
            self.event(EventKind.FAULT, code)

    # --- the protocol -------------------------------------------------------------------

    def status(self) -> Status:
        return Status(self.state, self.fault, self.last_count, DECK_SIZE, self.boot_id)

    def command(self, request: Frame) -> Frame:
        if request.type == MsgType.SHUFFLE:
            if self.state is ShufflerState.SHUFFLING:
                return self.nak(request, NakReason.BUSY)
            self.state, self.fault = ShufflerState.SHUFFLING, FaultCode.NONE
            self.event(EventKind.SHUFFLE_STARTED)
            self.spawn(self._shuffle(), "sim-shuffle")
            return self.reply(request, MsgType.ACK)
        if request.type == MsgType.DECK and self.decks is not None:
            return self.reply(request, MsgType.DECK_INFO, encode_deck_info(self.loaded))
        if request.type in (MsgType.COUNT, MsgType.SELF_TEST):
            # Diagnostics run on a machine at rest; a count needs the counter, not a fault.
            if self.state is ShufflerState.SHUFFLING:
                return self.nak(request, NakReason.BUSY)
            if request.type == MsgType.SELF_TEST:
                failure = self.self_test_failure
                report = f"FAILED: {failure}" if failure else "motors, sensors and counter ok"
                return self.reply(
                    request, MsgType.SELF_TESTED, encode_self_tested(failure is None, report)
                )
            if self.state is ShufflerState.FAULT:
                return self.nak(request, NakReason.ILLEGAL_IN_STATE)
            return self.reply(request, MsgType.COUNTED, encode_counted(len(self.deck), DECK_SIZE))
        return super().command(request)

    async def _shuffle(self) -> None:
        await asyncio.sleep(self.shuffle_ms / 1000)
        k = self.knobs
        code = (
            FaultCode.JAM
            if k.jam_next_shuffle
            else FaultCode.CYCLE_INCOMPLETE
            if k.incomplete_next_shuffle
            else FaultCode.STOPPED
            if k.stop_next_shuffle
            else None
        )
        if code is not None:
            self.knobs = ShuffleFaults()
            self.fail(code)
            return
        self.rng.shuffle(self.deck)
        if self.decks:
            self.loaded = self.decks[self.shuffles % len(self.decks)]  # 649a.3(b)(3)
        self.shuffles += 1
        self.last_count = len(self.deck)
        self.state = ShufflerState.READY
        self.event(EventKind.SHUFFLE_COMPLETE, self.last_count)
