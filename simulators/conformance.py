"""The reference shuffler's and shoe's simulators as the conformance kit drives them
(tablectl.conformance; the reference driver names them as `Driver.simulator` and
`Driver.shoe_simulator`). Each knob is one the simulators already have (simulators/faults.py,
`DealFaults`), set as the kit's protocol (tablectl.drivers.api) names it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from tablectl.drivers.api import ShufflerDriver
from tablectl.drivers.reference.link import PolledDevice
from tablectl.drivers.reference.messages import DeviceEvent, Identity, MsgType
from tablectl.drivers.reference.shoe_codec import ShoeFaultCode, ShoeState
from tablectl.drivers.reference.shuffler_codec import FaultCode, ShufflerState
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.faults import LineFaults
from tablectl.simulators.shoe import ShoeSimulator
from tablectl.simulators.shuffler import ShufflerSimulator

from tablectl.rules.cards import full_deck

_COMMANDS = {
    "identify": MsgType.IDENTIFY,
    "status": MsgType.POLL,
    "shuffle": MsgType.SHUFFLE,
    "count": MsgType.COUNT,
    "deal": MsgType.DEAL,
}
NOISE = b"\x55\xaa\x02\x01\x07\x00"  # a start byte and a header that leads nowhere


class _Noisy(LineFaults):
    def __call__(self, data: bytes) -> list[bytes]:
        return super().__call__(NOISE + data)


class _KitLine(SimulatedDevice):
    """The knobs on the line and the unit that the kit's shuffler and shoe share."""

    _close_on: int | None = None
    _server: asyncio.Server | None = None

    def close(self) -> None:
        super().close()
        self.hang_up()
        if self._server is not None:
            self._server.close()

    def silent(self, on: bool) -> None:
        self.line.drop = 1_000_000 if on else 0

    def garbage(self, on: bool) -> None:
        self.line = _Noisy() if on else LineFaults()

    def close_on(self, command: str) -> None:
        self._close_on = _COMMANDS[command]

    def swap(self, serial: str) -> None:
        self.identity = Identity(self.identity.model, serial, self.identity.firmware)
        self.reboot()
        self.hang_up()

    def _execute(self, request: Any) -> Any:
        reply = super()._execute(request)
        if request.type == self._close_on:
            self._close_on = None
            self.hang_up()  # it did what it was asked; the cable went before the answer
        return reply


async def _serve(device: SimulatedDevice) -> tuple[asyncio.Server, str]:
    server = await device.serve_tcp()
    host, port = server.sockets[0].getsockname()[:2]
    return server, f"socket://{host}:{port}"


class KitShuffler(_KitLine, ShufflerSimulator):
    """The reference simulator with the kit's knobs (implements api.ShufflerSimulator)."""

    def __init__(self) -> None:
        super().__init__(shuffle_ms=30, rng=random.Random(28))
        self._counts: list[int] = []
        self._jam_in_status = False

    async def start(self) -> dict[str, Any]:
        self._server, port = await _serve(self)
        return {"port": port, "poll_interval_ms": 100}

    def idle(self) -> bool:
        return self.state is not ShufflerState.SHUFFLING and not self.events

    def next_counts(self, counts: Sequence[int]) -> None:
        self._counts = list(counts)

    def jam_next(self, *, by_event: bool) -> None:
        if by_event:
            self.knobs.jam_next_shuffle = True
        else:
            self._jam_in_status = True

    def restate_last(self) -> None:
        boot, last = self.history[-1]
        if boot == self.boot_id:
            other = 51 if last.arg != 51 else 52
            self._restate = DeviceEvent(last.event_id, last.kind, other)

    def wind_seq(self, driver: ShufflerDriver) -> None:
        assert isinstance(driver, PolledDevice)
        driver.seq.start_at(250)

    async def _shuffle(self) -> None:
        deck = list(full_deck())
        if self._counts:
            n = self._counts.pop(0)
            self.deck = deck[:n] if n <= len(deck) else deck + deck[: n - len(deck)]
        else:
            self.deck = deck
        if self._jam_in_status:
            self._jam_in_status = False
            await asyncio.sleep(self.shuffle_ms / 1000)
            self.fail(FaultCode.JAM, as_event=False)
            return
        await super()._shuffle()


def shuffler() -> KitShuffler:
    return KitShuffler()


class KitShoe(_KitLine, ShoeSimulator):
    """The reference shoe simulator with the kit's knobs (implements api.ShoeSimulator): a
    deal's faults are its `DealFaults`, the line's its `LineFaults`."""

    JAM_AT = 2  # the card a jammed deal stops at (the third: two are dealt and read)

    def __init__(self) -> None:
        super().__init__(card_ms=2, rng=random.Random(29))
        self.refill = True  # a fresh shuffled deck whenever the one inside runs short
        self._jam_in_status = False

    async def start(self) -> dict[str, Any]:
        self._server, port = await _serve(self)
        return {"port": port, "poll_interval_ms": 100}

    def idle(self) -> bool:
        return self.state is not ShoeState.DEALING and not self.events

    def jam_next(self, *, by_event: bool) -> None:
        self.knobs.jam_at = self.JAM_AT
        self._jam_in_status = not by_event

    def fail_to_deal_next(self) -> None:
        self.knobs.short_by = 1  # one card short, and the deal reported complete

    def unread_next(self) -> None:
        self.knobs.unread_at = {1}

    def fail(self, code: ShoeFaultCode, *, as_event: bool = True) -> None:
        if self._jam_in_status:
            self._jam_in_status, as_event = False, False  # shown in STATUS only
        super().fail(code, as_event=as_event)

    def restate_last(self) -> None:
        boot, last = self.history[-1]
        if boot == self.boot_id:
            self._restate = DeviceEvent(last.event_id, last.kind, last.arg ^ 0x01)


def shoe() -> KitShoe:
    return KitShoe()
