"""The reference shuffler (docs/protocols/shuffler.md) on the shared polled-device link."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tablectl.drivers.api import DeviceReport, LinkError
from tablectl.drivers.reference.link import LinkSettings, NakError, PolledDevice
from tablectl.drivers.reference.messages import (
    MsgType,
    NakReason,
    ProtocolError,
    decode_counted,
    decode_deck_info,
    decode_self_tested,
    type_name,
)
from tablectl.drivers.reference.shuffler_codec import ShufflerCodec
from tablectl.drivers.transport.base import Connector, TraceWriter

T = TypeVar("T")

# What a technician is told when a diagnostic is refused (docs/protocols/shuffler.md).
_REFUSALS: dict[int, str] = {
    NakReason.BUSY: "it is shuffling; ask again when it has finished",
    NakReason.ILLEGAL_IN_STATE: "it is in fault; clear the fault first",
}


class ReferenceShuffler(PolledDevice):
    def __init__(
        self,
        connector: Connector,
        emit: Callable[[DeviceReport], None],
        settings: LinkSettings,
        cursor: tuple[int, int] | None = None,
        trace: TraceWriter | None = None,
    ) -> None:
        super().__init__(ShufflerCodec(), connector, emit, settings, cursor, trace)

    async def shuffle(self) -> None:
        reply = await self.command(MsgType.SHUFFLE)
        if reply.type != MsgType.ACK:
            self.counters.bad_replies += 1
            raise LinkError(f"SHUFFLE answered with {type_name(reply.type)}")

    async def count_deck(self) -> tuple[int, int]:
        """The cards the shuffler holds, counted by it now: (counted, expected)."""
        return await self._diagnostic(MsgType.COUNT, MsgType.COUNTED, decode_counted)

    async def self_test(self) -> tuple[bool, str]:
        """The device's self-test: (passed, its report)."""
        return await self._diagnostic(MsgType.SELF_TEST, MsgType.SELF_TESTED, decode_self_tested)

    async def deck_loaded(self) -> tuple[str, str] | None:
        """The deck it holds, (id, back colour), where it reports one (DECK); None from a
        shuffler that does not (it NAKs DECK as an unknown type) or holds none it knows."""
        try:
            reply = await self.command(MsgType.DECK)
        except NakError as exc:
            if exc.code == NakReason.UNKNOWN_TYPE:
                return None
            raise
        try:
            if reply.type != MsgType.DECK_INFO:
                raise LinkError(f"DECK answered with {type_name(reply.type)}")
            return decode_deck_info(reply.payload)
        except (LinkError, ProtocolError) as exc:
            self.counters.bad_replies += 1
            raise LinkError(f"DECK: {exc}") from None

    async def _diagnostic(
        self, request: MsgType, expected: MsgType, decode: Callable[[bytes], T]
    ) -> T:
        try:
            reply = await self.command(request)
        except NakError as exc:
            why = _REFUSALS.get(exc.code)
            if why is None:
                raise
            raise LinkError(f"the shuffler refused {request.name}: {why}") from None
        try:
            if reply.type != expected:
                raise LinkError(f"{request.name} answered with {type_name(reply.type)}")
            return decode(reply.payload)
        except (LinkError, ProtocolError) as exc:
            self.counters.bad_replies += 1
            raise LinkError(f"{request.name}: {exc}") from None
