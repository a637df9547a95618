"""The relay's own MQTT 5 client (tablectl/mqtt/client.py) against a private Mosquitto:
connect, QoS 1 pipelined with a future per PUBACK, refusals seen as refusals, a lost broker,
the last-will, and TLS with the shipped broker config; against a plain socket where the test
must see the bytes (written at once, the broker's Receive Maximum kept)."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import aiomqtt
import mqtt5
import pytest
from tablectl.simulators.broker import PrivateBroker, Secure

from tablectl.mqtt.client import (
    ClosedBeforeAccepted,
    ConnectionLost,
    ConnectRefused,
    Message,
    MqttClient,
    MqttError,
    PublishRefused,
    Will,
)

SITE, TABLE = "pa-demo-casino", "tcp-07"
ROOT = f"tablectl/v1/{SITE}/{TABLE}"


async def received(client: MqttClient, count: int) -> list[Message]:
    out: list[Message] = []
    async with asyncio.timeout(10):
        async for message in client.messages():
            out.append(message)
            if len(out) == count:
                return out
    raise AssertionError("the messages stopped")


async def test_a_window_of_publishes_each_with_its_puback_arrives_in_order(
    broker: PrivateBroker,
) -> None:
    async with (
        MqttClient(broker.host, broker.port, client_id="sub") as sub,
        MqttClient(broker.host, broker.port, client_id="pub") as pub,
    ):
        await sub.subscribe("t/pipe")
        # 500 handed over before any PUBACK can have come back: one future each.
        acks = [pub.publish_nowait("t/pipe", str(i).encode()) for i in range(500)]
        assert not any(a.done() for a in acks)
        pub.flush()
        async with asyncio.timeout(10):
            await asyncio.gather(*acks)
        got = await received(sub, 500)
        assert [m.payload for m in got] == [str(i).encode() for i in range(500)]
        assert all(m.topic == "t/pipe" and not m.retain for m in got)


class PlainBroker:
    """A broker of the test's own, on a plain socket: it answers the CONNECT as told and then
    reads and writes packets as the test says (its reads block the loop where a test wants
    to see that bytes were written without a turn of the loop)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._conn: socket.socket | None = None
        self._data = b""

    async def accept(self, client: MqttClient, connack: mqtt5.ConnAckPacket) -> None:
        def serve() -> socket.socket:
            conn, _ = self._listener.accept()
            conn.settimeout(10)
            conn.recv(1024)  # the CONNECT
            conn.sendall(connack.write())
            return conn

        self._conn, _ = await asyncio.gather(asyncio.to_thread(serve), client.connect())

    @property
    def conn(self) -> socket.socket:
        assert self._conn is not None
        return self._conn

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)

    def packets(self, count: int) -> list[mqtt5.Packet]:
        """The next count packets from the client (blocking: call through to_thread, or to
        block the loop on purpose)."""
        got: list[mqtt5.Packet] = []
        while len(got) < count:
            try:
                packet, size = mqtt5.read(memoryview(self._data))
            except IndexError:
                self._data += self.conn.recv(65536)
                continue
            self._data = self._data[size:]
            got.append(packet)
        return got

    def nothing_waiting(self) -> bool:
        """No byte from the client is waiting to be read (a non-blocking look, right now)."""
        self.conn.setblocking(False)
        try:
            return not self._data and not self.conn.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return not self._data
        finally:
            self.conn.settimeout(10)

    def hang_up_after_the_connect(self) -> None:
        """Take the CONNECT and close, with no CONNACK (blocking: through to_thread)."""
        conn, _ = self._listener.accept()
        with conn:
            conn.recv(1024)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._listener.close()


@pytest.fixture
def plain() -> Iterator[PlainBroker]:
    broker = PlainBroker()
    yield broker
    broker.close()


async def test_a_flushed_publish_is_on_the_wire_before_the_loop_turns(plain: PlainBroker) -> None:
    # flush writes when a batch is handed over, not a loop turn or two later: the plain
    # broker, read with the loop blocked, sees the PUBLISH without the loop having run since.
    client = MqttClient("127.0.0.1", plain.port, client_id="flush")
    await plain.accept(client, mqtt5.ConnAckPacket())
    client.publish_nowait("t/flush", b"now")
    client.flush()
    (packet,) = plain.packets(1)  # the loop is blocked here
    assert isinstance(packet, mqtt5.PublishPacket)
    assert (packet.topic, packet.payload) == ("t/flush", b"now")
    client.close()


async def test_no_more_publishes_are_in_flight_than_the_broker_takes(plain: PlainBroker) -> None:
    # The broker's Receive Maximum (MQTT 5.0, 3.3.4): the rest wait, in order, for PUBACKs.
    client = MqttClient("127.0.0.1", plain.port, client_id="quota")
    await plain.accept(client, mqtt5.ConnAckPacket(receive_max=2))
    acks = [client.publish_nowait("t/q", str(i).encode()) for i in range(5)]
    client.flush()
    first = await asyncio.to_thread(plain.packets, 2)
    assert [p.payload for p in first if isinstance(p, mqtt5.PublishPacket)] == [b"0", b"1"]
    assert isinstance(first[0], mqtt5.PublishPacket)
    plain.send(mqtt5.PubAckPacket(first[0].packet_id or 0).write())
    await asyncio.wait_for(acks[0], 5)
    (third,) = await asyncio.to_thread(plain.packets, 1)
    assert isinstance(third, mqtt5.PublishPacket) and third.payload == b"2"
    assert not any(a.done() for a in acks[1:])
    client.close()
    for acked in acks[1:]:
        with pytest.raises(ConnectionLost):
            await acked


async def test_a_packet_split_across_reads_is_taken_whole(plain: PlainBroker) -> None:
    client = MqttClient("127.0.0.1", plain.port, client_id="split")
    await plain.accept(client, mqtt5.ConnAckPacket())
    publish = mqtt5.PublishPacket("t/split", b"x" * 300, qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=7)
    data = publish.write()
    for i in range(len(data)):  # a byte at a time, each its own read
        plain.send(data[i : i + 1])
        await asyncio.sleep(0)
    (message,) = await received(client, 1)
    assert (message.topic, message.payload) == ("t/split", b"x" * 300)
    (ack,) = await asyncio.to_thread(plain.packets, 1)
    assert isinstance(ack, mqtt5.PubAckPacket) and ack.packet_id == 7
    client.close()


async def test_a_slow_consumer_leaves_what_it_cannot_take_unread_and_unacknowledged(
    plain: PlainBroker,
) -> None:
    # max_inbox 2: the third message is not read, so not acknowledged, until the consumer
    # catches up; the broker holds it meanwhile (and past its queue, drops it).
    client = MqttClient("127.0.0.1", plain.port, client_id="slow", max_inbox=2)
    await plain.accept(client, mqtt5.ConnAckPacket())
    plain.send(
        b"".join(
            mqtt5.PublishPacket(
                "t/slow", str(i).encode(), qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=i
            ).write()
            for i in range(1, 6)
        )
    )
    acks = await asyncio.to_thread(plain.packets, 2)
    assert [a.packet_id for a in acks if isinstance(a, mqtt5.PubAckPacket)] == [1, 2]
    assert client.messages_waiting == 2 and plain.nothing_waiting()
    got = await received(client, 5)  # consuming lets the rest be read, in order
    assert [m.payload for m in got] == [b"1", b"2", b"3", b"4", b"5"]
    rest = await asyncio.to_thread(plain.packets, 3)
    assert [a.packet_id for a in rest if isinstance(a, mqtt5.PubAckPacket)] == [3, 4, 5]
    client.close()


async def test_a_broker_that_does_not_answer_the_keep_alive_is_gone(plain: PlainBroker) -> None:
    # The keep-alive (MQTT 5.0, 3.1.2.10): a PINGREQ when nothing else went out for half of
    # it, and no PINGRESP within it ends the connection; a PINGRESP keeps it.
    client = MqttClient("127.0.0.1", plain.port, client_id="ping", keepalive_s=2)
    await plain.accept(client, mqtt5.ConnAckPacket())
    (ping,) = await asyncio.to_thread(plain.packets, 1)
    assert isinstance(ping, mqtt5.PingReqPacket)
    plain.send(mqtt5.PingRespPacket().write())
    (again,) = await asyncio.to_thread(plain.packets, 1)  # answered: it pings on
    assert isinstance(again, mqtt5.PingReqPacket) and client.is_connected
    with pytest.raises(ConnectionLost, match="did not answer a PINGREQ"):
        await asyncio.wait_for(client.wait_closed(), 10)


async def test_a_disconnect_from_the_broker_ends_the_connection_with_its_reason(
    plain: PlainBroker,
) -> None:
    client = MqttClient("127.0.0.1", plain.port, client_id="told")
    await plain.accept(client, mqtt5.ConnAckPacket())
    pending = client.publish_nowait("t/x", b"in flight")
    client.flush()
    shutting_down = mqtt5.DisconnectReasonCode.SERVER_SHUTTING_DOWN
    plain.send(mqtt5.DisconnectPacket(reason_code=shutting_down).write())
    with pytest.raises(ConnectionLost, match=r"Server shutting down \(0x8b\)"):
        await asyncio.wait_for(client.wait_closed(), 5)
    with pytest.raises(ConnectionLost):
        await pending


async def test_a_broker_that_hangs_up_before_its_connack_is_said_so(plain: PlainBroker) -> None:
    client = MqttClient("127.0.0.1", plain.port, client_id="early")
    with pytest.raises(ClosedBeforeAccepted) as closed:
        await asyncio.gather(asyncio.to_thread(plain.hang_up_after_the_connect), client.connect())
    assert not closed.value.tls


async def test_a_lost_broker_fails_what_is_in_flight_and_a_new_client_connects_again(
    broker: PrivateBroker,
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        client = MqttClient(broker.host, broker.port)
        await client.connect()
        assert client.is_connected
        broker.stop()
        with pytest.raises(ConnectionLost):
            await asyncio.wait_for(client.wait_closed(), 5)
        assert not client.is_connected
        with pytest.raises(ConnectionLost):
            client.publish_nowait("t/x", b"after")
        with pytest.raises(MqttError):
            await MqttClient(broker.host, broker.port).connect()  # nobody listening
        broker.start()
        async with MqttClient(broker.host, broker.port) as again:
            await again.publish("t/x", b"back")
        # A connection that broke leaves no error in a future nobody reads.
        del client
        gc.collect()
        await asyncio.sleep(0)
        assert [str(c.get("exception") or c["message"]) for c in reported] == []
    finally:
        loop.set_exception_handler(None)


async def test_pubacks_pending_when_the_connection_drops_fail_as_lost(
    broker: PrivateBroker,
) -> None:
    client = MqttClient(broker.host, broker.port)
    await client.connect()
    pending = client.publish_nowait("t/x", b"never flushed")  # not written yet
    broker.stop()
    with pytest.raises(ConnectionLost):
        await asyncio.wait_for(pending, 5)


async def test_the_will_goes_out_when_the_client_vanishes_and_not_after_a_disconnect(
    broker: PrivateBroker,
) -> None:
    will = Will("t/status", b"offline", retain=True)
    async with MqttClient(broker.host, broker.port, client_id="watch") as watch:
        await watch.subscribe("t/status")
        polite = MqttClient(broker.host, broker.port, client_id="polite", will=will)
        await polite.connect()
        await polite.publish("t/status", b"online", retain=True)
        await polite.disconnect()
        vanishing = MqttClient(broker.host, broker.port, client_id="vanish", will=will)
        await vanishing.connect()
        await vanishing.publish("t/status", b"online again", retain=True)
        vanishing.close()  # no DISCONNECT: as a crash or a pulled cable looks to the broker
        got = await received(watch, 3)
        assert [m.payload for m in got] == [b"online", b"online again", b"offline"]


# --- the shipped broker config: TLS, the certificate's name as the identity, the ACL ----------


@pytest.fixture(scope="module")
def secure_broker() -> Iterator[PrivateBroker]:
    with PrivateBroker(secure=Secure(SITE, backends=("pgs",))) as broker:
        yield broker


def tls_as(broker: PrivateBroker, who: str, subject: str | None = None) -> ssl.SSLContext:
    assert broker.pki is not None
    cert, key = broker.pki.issue(who, subject=subject)
    context = ssl.create_default_context(cafile=str(broker.pki.ca_cert))
    context.load_cert_chain(str(cert), str(key))
    return context


def table_client(broker: PrivateBroker, **changes: Any) -> MqttClient:
    settings: dict[str, Any] = {
        "client_id": f"tablectl-{SITE}-{TABLE}",
        "username": TABLE,
        "tls": tls_as(broker, TABLE),
        **changes,
    }
    return MqttClient(broker.host, broker.port, **settings)


async def test_over_tls_a_publish_the_acl_denies_is_a_refusal_not_a_success(
    secure_broker: PrivateBroker,
) -> None:
    pgs = MqttClient(
        secure_broker.host,
        secure_broker.port,
        username="pgs",
        tls=tls_as(secure_broker, "pgs"),
    )
    async with (
        pgs as backend,
        table_client(secure_broker) as table,
    ):
        await backend.subscribe(f"tablectl/v1/{SITE}/#")
        await table.publish(f"{ROOT}/evt", b'{"seq":1}')  # its own prefix: allowed
        with pytest.raises(PublishRefused) as refused:
            await table.publish(f"tablectl/v1/{SITE}/tcp-08/evt", b'{"seq":1}')  # not its own
        assert refused.value.reason_code == 0x87  # Not authorized
        assert f"publish to tablectl/v1/{SITE}/tcp-08/evt refused" in str(refused.value)
        # A refused publish ends nothing: the session goes on and the next one arrives.
        await table.publish(f"{ROOT}/evt", b'{"seq":2}')
        got = await received(backend, 2)
        assert [(m.topic, json.loads(m.payload)["seq"]) for m in got] == [
            (f"{ROOT}/evt", 1),
            (f"{ROOT}/evt", 2),
        ]


async def test_refused_credentials_carry_the_connack_reason(
    secure_broker: PrivateBroker,
) -> None:
    # The broker takes the certificate's common name as the username: one without a common
    # name gives the client no identity, and the CONNACK refuses it.
    nameless = tls_as(secure_broker, "nameless", subject="/O=tablectl")
    with pytest.raises(ConnectRefused) as refused:
        await table_client(secure_broker, tls=nameless).connect()
    # Mosquitto 2.0 says "Bad user name or password" (0x86); MQTT 5 also has 0x87 for this.
    assert refused.value.reason_code in (0x86, 0x87) and refused.value.permanent


async def test_a_broker_certificate_from_another_ca_is_refused_by_the_handshake(
    secure_broker: PrivateBroker,
) -> None:
    with pytest.raises(MqttError, match="CERTIFICATE_VERIFY_FAILED"):
        await table_client(secure_broker, tls=ssl.create_default_context()).connect()


async def test_aiomqtt_peers_see_what_this_client_publishes(broker: PrivateBroker) -> None:
    # An independent client (as backends use) reads our QoS 1 messages and retained ones.
    async with MqttClient(broker.host, broker.port) as ours:
        await ours.publish("t/retained", b"kept", retain=True)
        async with aiomqtt.Client(broker.host, broker.port) as theirs:
            await theirs.subscribe("t/#", qos=1)
            await ours.publish("t/live", b"now")
            seen = []
            async with asyncio.timeout(10):
                async for message in theirs.messages:
                    seen.append((str(message.topic), message.payload, message.retain))
                    if len(seen) == 2:
                        break
    assert seen == [("t/retained", b"kept", True), ("t/live", b"now", False)]
