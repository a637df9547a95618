"""What the relay's parts share: one connection's session (its client, the publish window,
the PUBACKs awaited, the meters to send), the counters status and health show, the journal
row as it is published, and the journal thread every database write runs in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from tablectl.mqtt.client import BrokerUnsuitable, MqttClient, PublishRefused
from tablectl.mqtt.contract import MeterValue

T = TypeVar("T")


class PublishedRow(Protocol):
    """A journal row as the relay publishes it: straight from its commit (`JournalRow`) or
    read back from the journal (`OutboxRow`)."""

    @property
    def seq(self) -> int: ...
    @property
    def event_id(self) -> str: ...
    @property
    def ts(self) -> str: ...
    @property
    def boot_id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def data_json(self) -> str: ...


class InJournalThread(Protocol):
    """Runs a database write where every write happens: the daemon's journal thread."""

    def __call__(self, work: Callable[[], T], /) -> Awaitable[T]: ...


@dataclass
class RelayCounters:
    connects: int = 0
    published: int = 0
    offered: int = 0  # of those, handed on straight from their commit (Relay.offer)
    replayed: int = 0
    acks: int = 0
    inbound: int = 0
    malformed_inbound: int = 0
    acks_refused: int = 0  # unknown backend, or past the journal
    commands: int = 0
    publishes_refused: int = 0  # a PUBACK that said no (the ACL): the session ends
    publishes_unacknowledged: int = 0  # no PUBACK within the bound: the session ends
    rows_withheld: int = 0  # placeholders sent for rows larger than the broker accepts
    retained_too_large: int = 0  # birth, health, pace or meter larger: not sent (a fault)
    brokers_unsuitable: int = 0  # connections refused: the broker's limit is below our needs
    redelivered: int = 0  # rows sent again on one connection: heals and replays asked for
    heals: int = 0  # replays started because a backend's ack stalled
    replay_rewinds: int = 0  # replays gone back to the ack: a window lost, its window halved
    replay_requests: int = 0  # cmd/replay requests taken (each answered)
    replays_started: int = 0  # replays begun for them (at once, or once the limit allowed)
    replays_held: int = 0  # requests held by the rate limit (folded into one, started later)
    replays_running: int = 0  # requests a replay under way already covered


@dataclass
class Session:
    client: MqttClient
    window: int  # publishes that may await their PUBACK at once (mqtt.publish_window)
    in_flight: int = 0
    room: asyncio.Event = field(default_factory=asyncio.Event)  # a PUBACK freed a slot
    meters: dict[str, MeterValue] = field(default_factory=dict)
    # A PUBACK that said no, or a placeholder the broker cannot take: the session ends (a
    # PUBACK not come in time ends the client's).
    failed: PublishRefused | BrokerUnsuitable | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def fail(self, exc: PublishRefused | BrokerUnsuitable) -> None:
        if self.failed is None:
            self.failed = exc
            self.ended.set()

    def has_room(self, count: int) -> bool:
        return self.in_flight + count <= self.window

    async def slot(self) -> None:
        """Until one more publish may await its PUBACK."""
        while not self.has_room(1):
            self.room.clear()
            await self.room.wait()
