"""The MQTT session against brokers that misbehave: silent after the CONNACK, PUBACKs withheld,
limits in the CONNACK (Maximum Packet Size, Maximum QoS, Retain Available), a packet larger
than ours; and against Mosquitto: the delayed will, its max_packet_size and retain_available,
and a journal row larger than the broker accepts on a running table."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path

import mqtt5
import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.scripted_broker import Script, ScriptedBroker

from tablectl.config import MqttSection
from tablectl.core.events import ChipSensed, ShuffleRequestFailed
from tablectl.core.table import Phase
from tablectl.mqtt.client import (
    BrokerUnsuitable,
    ConnectionLost,
    Message,
    MqttClient,
    PacketTooLarge,
    PublishUnacknowledged,
    Will,
)
from tablectl.mqtt.contract import ROW_WITHHELD, WILL_DELAY_S, RowWithheldEvent
from tablectl.mqtt.relay import make_client
from tablectl.util.reconnect import Permanent

from .conftest import simulated_table

QOS1 = mqtt5.QoS.AT_LEAST_ONCE


async def publishing(client: MqttClient, stop: asyncio.Event) -> None:
    """A publish every 100 ms whose PUBACK nobody awaits (as the link controller's acks)."""
    with contextlib.suppress(ConnectionLost):
        while not stop.is_set() and client.is_connected:
            client.publish_nowait("t/busy", b"x")
            client.flush()
            await asyncio.sleep(0.1)


async def test_a_broker_silent_after_its_connack_is_found_while_the_client_publishes() -> None:
    # Publishes keep what goes out fresh: the keep-alive is judged on what comes in too.
    async with ScriptedBroker(Script(silent_after_connack=True)) as broker:
        client = MqttClient("127.0.0.1", broker.port, keepalive_s=2, puback_timeout_s=60)
        await client.connect()
        stop = asyncio.Event()
        task = asyncio.create_task(publishing(client, stop))
        with pytest.raises(ConnectionLost, match="did not answer a PINGREQ"):
            await asyncio.wait_for(client.wait_closed(), 10)
        stop.set()
        await task
        sent = broker.latest
        assert sent.of(mqtt5.PingReqPacket), "no PINGREQ although nothing came in"
        assert len(sent.publishes()) > 1  # it was publishing all along


async def test_a_broker_that_withholds_pubacks_ends_the_session_for_every_user() -> None:
    # It answers PINGREQs (the keep-alive is content) but no PUBLISH: the client's own
    # deadline ends the connection, so a user that throws its futures away learns of it too.
    async with ScriptedBroker(Script(withhold_pubacks=True)) as broker:
        client = MqttClient("127.0.0.1", broker.port, keepalive_s=2, puback_timeout_s=1)
        await client.connect()
        kept = client.publish_nowait("t/kept", b"awaited")
        stop = asyncio.Event()
        task = asyncio.create_task(publishing(client, stop))
        with pytest.raises(PublishUnacknowledged, match="did not acknowledge a publish to t/kept"):
            await asyncio.wait_for(client.wait_closed(), 10)
        stop.set()
        await task
        with pytest.raises(PublishUnacknowledged):
            await kept
        assert broker.latest.publishes() and not client.is_connected


async def test_a_subscription_not_acknowledged_ends_the_session() -> None:
    async with ScriptedBroker(Script(silent_after_connack=True)) as broker:
        client = MqttClient("127.0.0.1", broker.port, keepalive_s=60, puback_timeout_s=1)
        await client.connect()
        with pytest.raises(PublishUnacknowledged, match="a subscription to t/sub"):
            await asyncio.wait_for(client.subscribe("t/sub"), 10)


async def test_a_publish_larger_than_the_broker_takes_is_refused_here_and_the_session_goes_on() -> (
    None
):
    async with ScriptedBroker(Script(max_packet_size=200)) as broker:
        async with MqttClient("127.0.0.1", broker.port) as client:
            assert client.limits.max_packet_bytes == 200
            with pytest.raises(PacketTooLarge) as refused:
                client.publish_nowait("t/big", b"x" * 300)
            assert (refused.value.size, refused.value.limit) == (313, 200)
            fits = b"y" * 187  # a packet of 200 bytes exactly
            assert len(mqtt5.PublishPacket("t/big", fits, qos=QOS1, packet_id=1).write()) == 200
            await asyncio.wait_for(client.publish("t/big", fits), 10)
            assert client.is_connected
        assert [p.payload for p in broker.latest.publishes()] == [fits]  # nothing else sent


async def test_a_broker_that_takes_qos_0_only_is_refused_at_connect() -> None:
    async with ScriptedBroker(Script(max_qos=mqtt5.QoS.AT_MOST_ONCE)) as broker:
        client = MqttClient("127.0.0.1", broker.port)
        with pytest.raises(BrokerUnsuitable, match="QoS 0 only") as refused:
            await client.connect()
        assert isinstance(refused.value, Permanent)  # retried at the longest backoff
        await broker.wait_for(lambda: bool(broker.latest.of(mqtt5.DisconnectPacket)))
        assert not broker.latest.publishes()


async def test_without_retained_messages_the_will_and_retained_publishes_go_unretained() -> None:
    async with ScriptedBroker(Script(retain_available=False)) as broker:
        will = Will("t/status", b"offline", retain=True, delay_s=5)
        async with MqttClient("127.0.0.1", broker.port, will=will) as client:
            await client.publish("t/status", b"online", retain=True)
            assert client.retains_dropped == 1
        first, second = broker.connections
        assert first.connect.will is not None and first.connect.will.retain  # refused: 0x9A
        assert second.connect.will is not None and not second.connect.will.retain
        (published,) = second.publishes()
        assert published.payload == b"online" and not published.retain


async def test_the_client_says_its_maximum_packet_size_and_buffers_no_larger_packet() -> None:
    async with ScriptedBroker() as broker:
        client = MqttClient("127.0.0.1", broker.port, max_packet_bytes=1000)
        await client.connect()
        assert broker.latest.connect.max_packet_size == 1000
        # Only the fixed header of a PUBLISH announcing 100 kB: the client ends on it at
        # once, with nothing of the rest buffered or awaited.
        big = mqtt5.PublishPacket("t/x", b"z" * 100_000, qos=QOS1, packet_id=1).write()
        broker.send(big[:8])
        with pytest.raises(ConnectionLost, match="more than our Maximum Packet Size"):
            await asyncio.wait_for(client.wait_closed(), 10)
        await broker.wait_for(lambda: bool(broker.latest.of(mqtt5.DisconnectPacket)))
        (goodbye,) = broker.latest.of(mqtt5.DisconnectPacket)
        assert isinstance(goodbye, mqtt5.DisconnectPacket) and int(goodbye.reason_code) == 0x95


# The codec leaves its UnicodeDecodeError set under its panic: Python reports it as
# unraisable (one "Exception ignored" line), which is the library's, not ours.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_topic_the_codec_cannot_read_is_a_malformed_packet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A PUBLISH whose topic is not UTF-8 made the codec panic (pyo3's PanicException, a
    BaseException the parser let through): asyncio printed a fatal error with a traceback
    and the session ended on "PyObject pointer is null". It is a malformed packet."""
    async with ScriptedBroker() as broker:
        client = MqttClient("127.0.0.1", broker.port)
        await client.connect()
        broker.send(b"\x30\x05\x00\x02\xff\xfe\x00")  # topic: 2 bytes, not UTF-8
        with pytest.raises(ConnectionLost, match="a malformed packet from the broker"):
            await asyncio.wait_for(client.wait_closed(), 10)
    assert "Fatal error" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        # Topic Alias Maximum is 0 (we send none): an alias is a protocol error, and the
        # message it carried had no topic at all (it was queued for the consumer as "").
        (mqtt5.PublishPacket("", b"x", topic_alias=3).write(), "a topic alias (3)"),
        (b"\x30\x07\x00\x03a/#\x00x", "a topic name with a wildcard ('a/#')"),
    ],
    ids=["topic-alias", "wildcard"],
)
async def test_a_publish_no_broker_may_send_ends_the_session(sent: bytes, said: str) -> None:
    async with ScriptedBroker() as broker:
        client = MqttClient("127.0.0.1", broker.port)
        await client.connect()
        broker.send(sent)
        with pytest.raises(ConnectionLost, match=re.escape(said)):
            await asyncio.wait_for(client.wait_closed(), 10)


async def test_the_tables_client_delays_its_will_and_keeps_its_session_as_long() -> None:
    async with ScriptedBroker() as broker:
        config = MqttSection(port=broker.port)
        async with make_client(config, site="s", table="t", will=b"offline"):
            pass
        connect = broker.latest.connect
        assert connect.will is not None and connect.will.will_delay_interval == WILL_DELAY_S
        assert connect.session_expiry_interval == WILL_DELAY_S
        assert connect.max_packet_size is not None


# --- against Mosquitto --------------------------------------------------------------------


async def first_message(client: MqttClient) -> Message:
    async with asyncio.timeout(30):
        async for message in client.messages():
            return message
    raise AssertionError("no message")


async def test_a_brief_reconnect_does_not_send_the_will(broker: PrivateBroker) -> None:
    # Both wills wait a second; the first connection vanishes, the same client id is back at
    # once, and the second vanishes later: the first will the watcher hears is the second's.
    async with MqttClient(broker.host, broker.port, client_id="watch") as watch:
        await watch.subscribe("t/status")
        first = MqttClient(
            broker.host, broker.port, client_id="table", will=Will("t/status", b"off-1", delay_s=1)
        )
        await first.connect()
        first.close()  # vanishes: no DISCONNECT
        second = MqttClient(
            broker.host, broker.port, client_id="table", will=Will("t/status", b"off-2", delay_s=1)
        )
        await second.connect()
        await second.publish("t/status", b"online", retain=True)
        assert (await first_message(watch)).payload == b"online"
        second.close()
        assert (await first_message(watch)).payload == b"off-2"  # never off-1


async def test_mosquitto_without_retained_messages_takes_the_table(tmp_path: Path) -> None:
    with PrivateBroker(retain_available=False) as broker:
        config = MqttSection(port=broker.port)
        async with make_client(config, site="s", table="t", will=b"offline") as client:
            assert not client.limits.retain_available
            await client.publish("t/status", b"online", retain=True)  # goes, unretained
            assert client.retains_dropped == 1 and client.is_connected


async def test_a_row_larger_than_the_broker_takes_is_a_placeholder_and_a_fault_naming_it(
    tmp_path: Path,
) -> None:
    # Mosquitto says a Maximum Packet Size in its CONNACK; one journal row is larger.
    with PrivateBroker(max_packet_size=2048) as broker:
        async with simulated_table(broker, tmp_path / "data") as table:
            await table.wait_phase(Phase.BETTING)
            await table.wait_backend_caught_up()
            store = table.daemon.store
            assert store is not None
            table.daemon.post(ShuffleRequestFailed(reason="jammed " * 400, retrying=True))
            await table.daemon.wait_until(lambda s: s.delivery_fault is not None, 10)
            reader = table.daemon.reader
            assert reader is not None
            big = next(
                seq
                for seq in range(store.last_seq, 0, -1)
                if reader.outbox_after(seq - 1, limit=1)[0].type == "shuffler.request_failed"
            )
            fault = table.state.delivery_fault
            assert fault is not None and f"journal row {big} (shuffler.request_failed" in fault
            # Later rows flow: chips placed and lifted.
            table.daemon.post(ChipSensed(seat=1, present=True, since_ns=0))
            await table.wait_backend_caught_up()
            held = table.backend.events[big]
            assert held["type"] == ROW_WITHHELD
            placeholder = RowWithheldEvent.model_validate(held)
            assert placeholder.data.withheld_type == "shuffler.request_failed"
            assert placeholder.data.broker_max_bytes == 2048
            assert placeholder.data.packet_bytes > 2048
            # The fault is journaled once, reaches the backend, and stands in status.
            types = [e["type"] for e in table.backend.events.values()]
            assert types.count("delivery.fault") == 1
            assert table.state.delivery_fault == fault
            status = await table.status()
            # (the game pace, ~3 KB, is larger than this broker takes: a fault of its own)
            broker_faults = [f.what for f in status.faults if f.device == "broker"]
            assert broker_faults.count("delivery-fault") == 1
            assert set(broker_faults) <= {"delivery-fault", "message-too-large"}
            relay = table.daemon.relay
            assert relay.counters.rows_withheld >= 1 and relay.counters.connects == 1
