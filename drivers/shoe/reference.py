"""The reference dealing shoe (docs/protocols/shoe.md) on the shared polled-device link."""

from __future__ import annotations

from collections.abc import Callable

from tablectl.drivers.api import DeviceReport, LinkError
from tablectl.drivers.reference.link import LinkSettings, PolledDevice
from tablectl.drivers.reference.messages import MsgType, type_name
from tablectl.drivers.reference.shoe_codec import ShoeCodec, encode_deal
from tablectl.drivers.transport.base import Connector, TraceWriter


class ReferenceShoe(PolledDevice):
    def __init__(
        self,
        connector: Connector,
        emit: Callable[[DeviceReport], None],
        settings: LinkSettings,
        cursor: tuple[int, int] | None = None,
        trace: TraceWriter | None = None,
    ) -> None:
        super().__init__(ShoeCodec(), connector, emit, settings, cursor, trace)

    async def deal(self, stacks: tuple[int, ...]) -> None:
        reply = await self.command(MsgType.DEAL, encode_deal(stacks))
        if reply.type != MsgType.ACK:
            self.counters.bad_replies += 1
            raise LinkError(f"DEAL answered with {type_name(reply.type)}")
        self.poll_soon()  # the locked table waits for every hand
