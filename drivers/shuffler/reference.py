"""The reference shuffler (docs/protocols/shuffler.md) on the shared polled-device link."""

from __future__ import annotations

from collections.abc import Callable

from tablectl.drivers.reference.link import DeviceReport, LinkError, LinkSettings, PolledDevice
from tablectl.drivers.reference.messages import MsgType, type_name
from tablectl.drivers.reference.shuffler_codec import ShufflerCodec
from tablectl.drivers.transport.base import Connector, TraceWriter


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
