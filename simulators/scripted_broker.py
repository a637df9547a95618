"""A broker that misbehaves as a test tells it: an asyncio TCP server on the `mqtt5` codec.

The same sans-I/O codec the client uses, on the other end of a real socket. By default it
is a polite QoS 1 broker for one client at a time (CONNACK, SUBACK granting QoS 1, PUBACK,
PINGRESP; it routes nothing). A `Script` makes it misbehave: its CONNACK's limits (Maximum
Packet Size, Maximum QoS, Retain Available, Receive Maximum, a refusal of a retained
will), silence after the CONNACK, PUBACKs withheld while PINGREQs are answered. Everything
each client sent is kept per connection (`connections`), for the test to read; `send`
writes to the newest connection whatever the test wants the client to receive, whole or in
part. Used by tests/test_mqtt_session.py; a technician can point a daemon at one too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import mqtt5

RETAIN_NOT_SUPPORTED = mqtt5.ConnAckReasonCode(0x9A)


@dataclass
class Script:
    """How the broker behaves. The CONNACK fields are MQTT 5.0, 3.2.2.3."""

    max_packet_size: int | None = None
    max_qos: mqtt5.QoS = field(default_factory=lambda: mqtt5.QoS.EXACTLY_ONCE)
    retain_available: bool = True
    receive_max: int = 65535
    silent_after_connack: bool = False  # reads on, answers nothing more
    withhold_pubacks: bool = False  # answers PINGREQ and SUBSCRIBE, never a PUBLISH


@dataclass
class Connection:
    """One client's connection, as the broker saw it."""

    writer: asyncio.StreamWriter
    packets: list[mqtt5.Packet] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def connect(self) -> mqtt5.ConnectPacket:
        first = self.packets[0]
        assert isinstance(first, mqtt5.ConnectPacket)
        return first

    def publishes(self) -> list[mqtt5.PublishPacket]:
        return [p for p in self.packets if isinstance(p, mqtt5.PublishPacket)]

    def of(self, kind: type[mqtt5.Packet]) -> list[mqtt5.Packet]:
        return [p for p in self.packets if isinstance(p, kind)]


class ScriptedBroker:
    """`async with ScriptedBroker(Script(...)) as broker:` then connect to broker.port."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.connections: list[Connection] = []
        self.changed = asyncio.Event()  # a packet arrived or a connection closed
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> ScriptedBroker:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for connection in self.connections:
            connection.writer.close()
        await self._server.wait_closed()

    @property
    def latest(self) -> Connection:
        return self.connections[-1]

    def send(self, data: bytes) -> None:
        """Bytes to the newest connection: a packet, or part of one."""
        self.latest.writer.write(data)

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(writer)
        self.connections.append(connection)
        buffer = b""
        try:
            while data := await reader.read(65536):
                buffer += data
                while True:
                    try:
                        packet, size = mqtt5.read(memoryview(buffer))
                    except IndexError:  # not whole yet
                        break
                    buffer = buffer[size:]
                    connection.packets.append(packet)
                    self._answer(connection, packet)
                    self.changed.set()
        except (ConnectionError, ValueError):
            pass
        finally:
            connection.closed.set()
            self.changed.set()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _answer(self, connection: Connection, packet: mqtt5.Packet) -> None:
        s = self.script
        if len(connection.packets) > 1 and s.silent_after_connack:
            return
        if isinstance(packet, mqtt5.ConnectPacket):
            will = packet.will
            if will is not None and will.retain and not s.retain_available:
                # MQTT 5.0, 3.2.2.3.5: a broker without retained messages refuses the will.
                refusal = mqtt5.ConnAckPacket(reason_code=RETAIN_NOT_SUPPORTED)
                connection.writer.write(refusal.write())
                connection.writer.close()
                return
            connack = mqtt5.ConnAckPacket(
                max_packet_size=s.max_packet_size,
                max_qos=s.max_qos,
                retain_available=s.retain_available,
                receive_max=s.receive_max,
            )
            connection.writer.write(connack.write())
        elif isinstance(packet, mqtt5.SubscribePacket):
            granted = [mqtt5.SubAckReasonCode.GRANTED_QOS_AT_LEAST_ONCE] * len(packet.topic_filters)
            connection.writer.write(mqtt5.SubAckPacket(packet.packet_id, granted).write())
        elif isinstance(packet, mqtt5.PublishPacket):
            if packet.packet_id is not None and not s.withhold_pubacks:
                connection.writer.write(mqtt5.PubAckPacket(packet.packet_id).write())
        elif isinstance(packet, mqtt5.PingReqPacket):
            connection.writer.write(mqtt5.PingRespPacket().write())
