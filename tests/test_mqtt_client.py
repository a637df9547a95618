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


async def test_a_flushed_publish_is_on_the_wire_before_the_loop_turns() -> None:
    # flush writes when a batch is handed over, not a loop turn or two later: a broker of
    # our own (a plain socket, read with the loop blocked) sees the PUBLISH without the loop
    # having run once since.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def accept() -> socket.socket:
            conn, _ = listener.accept()
            conn.recv(1024)  # the CONNECT
            conn.sendall(mqtt5.ConnAckPacket().write())
            return conn

        client = MqttClient("127.0.0.1", port, client_id="flush")
        conn, _ = await asyncio.gather(asyncio.to_thread(accept), client.connect())
        with conn:
            client.publish_nowait("t/flush", b"now")
            client.flush()
            conn.settimeout(5)
            packet, _ = mqtt5.read(memoryview(conn.recv(1024)))  # the loop is blocked here
            assert isinstance(packet, mqtt5.PublishPacket)
            assert (packet.topic, packet.payload) == ("t/flush", b"now")
        client.close()


async def test_no_more_publishes_are_in_flight_than_the_broker_takes() -> None:
    # The broker's Receive Maximum (MQTT 5.0, 3.3.4): the rest wait, in order, for PUBACKs.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def accept() -> socket.socket:
            conn, _ = listener.accept()
            conn.recv(1024)
            conn.sendall(mqtt5.ConnAckPacket(receive_max=2).write())
            return conn

        client = MqttClient("127.0.0.1", port, client_id="quota")
        conn, _ = await asyncio.gather(asyncio.to_thread(accept), client.connect())
        with conn:
            acks = [client.publish_nowait("t/q", str(i).encode()) for i in range(5)]
            client.flush()
            conn.settimeout(5)

            def publishes(count: int) -> list[mqtt5.PublishPacket]:
                got: list[mqtt5.PublishPacket] = []
                data = b""
                while len(got) < count:
                    data += conn.recv(1024)
                    while data:
                        try:
                            packet, size = mqtt5.read(memoryview(data))
                        except IndexError:
                            break
                        data = data[size:]
                        assert isinstance(packet, mqtt5.PublishPacket)
                        got.append(packet)
                return got

            first = await asyncio.to_thread(publishes, 2)
            assert [p.payload for p in first] == [b"0", b"1"]
            conn.sendall(mqtt5.PubAckPacket(first[0].packet_id or 0).write())
            await asyncio.wait_for(acks[0], 5)
            after_one = await asyncio.to_thread(publishes, 1)
            assert [p.payload for p in after_one] == [b"2"]
            assert not any(a.done() for a in acks[1:])
        client.close()
        for acked in acks[1:]:
            with pytest.raises(ConnectionLost):
                await acked


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
