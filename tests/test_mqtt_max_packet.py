"""A broker's Maximum Packet Size against what the table must send, on a real Mosquitto.

Below the smallest message the table cannot do without (a row's placeholder, `status`) the
broker is refused as unsuitable: a delivery fault naming its limit, a refusal's backoff (no
reconnect storm), nothing sent, the rows kept for a suitable broker. Above it, a retained
message that does not fit (birth, health, pace) is a fault of its own in status, counted,
and the journal's rows flow. See docs/mqtt.md ("Broker limits").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import mqtt5
import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.scripted_broker import Script, ScriptedBroker

from tablectl.core.events import ChipSensed
from tablectl.core.table import Phase

from .conftest import simulated_table

# Generous bounds for a condition to come about: not what is asserted.
UNTIL_S = 30.0


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(UNTIL_S):
        while not condition():  # noqa: ASYNC110 (counters and dicts have no event)
            await asyncio.sleep(0.02)


async def test_a_broker_too_small_for_a_placeholder_is_refused_and_a_suitable_one_gets_every_row(
    tmp_path: Path,
) -> None:
    small = PrivateBroker(max_packet_size=300)
    port = small.port
    small.start()
    try:
        async with simulated_table(small, tmp_path / "data", mqtt={"reconnect_max_s": 1}) as table:
            relay = table.daemon.relay
            reconnects = relay.reconnector.counters
            await table.daemon.wait_until(lambda s: s.delivery_fault is not None, UNTIL_S)
            fault = table.state.delivery_fault
            assert fault is not None
            assert "at most 300 bytes" in fault and "placeholder" in fault, fault
            table.daemon.post(ChipSensed(seat=1, present=True, since_ns=0))
            # Several attempts, each one refused: no session was served, nothing published.
            await _until(lambda: reconnects.refusals >= 3)
            assert relay.counters.connects == 0
            assert relay.counters.published == 0
            assert relay.counters.rows_withheld == 0
            assert reconnects.connects == 0 and reconnects.failures == reconnects.refusals
            assert relay.counters.brokers_unsuitable == reconnects.refusals
            # The fault is in status with its cause (journaled once: one change).
            status = await table.status()
            causes = [f.cause for f in status.faults if f.what == "delivery-fault"]
            assert len(causes) == 1 and "at most 300 bytes" in causes[0], causes
            store = table.daemon.store
            assert store is not None
            assert table.backend.events == {}

            # A suitable broker on the same address: every row, exactly once.
            small.close()
            with PrivateBroker(port=port):
                await table.wait_backend_caught_up(timeout_s=UNTIL_S)
                last = store.last_seq
                assert sorted(table.backend.events) == list(range(1, last + 1))
                assert table.backend.duplicates == 0
                types = [e["type"] for e in table.backend.events.values()]
                assert types.count("delivery.fault") == 1
                assert "delivery.row_withheld" not in types
                await table.daemon.wait_until(lambda s: s.delivery_fault is None, UNTIL_S)
                assert relay.counters.connects == 1
    finally:
        small.close()


@pytest.mark.parametrize("size", [700, 1200, 2048])
async def test_a_retained_message_larger_than_the_broker_takes_is_a_fault_and_rows_flow(
    tmp_path: Path, size: int
) -> None:
    with PrivateBroker(max_packet_size=size) as broker:
        async with simulated_table(broker, tmp_path / "data") as table:
            await table.wait_phase(Phase.BETTING)
            relay = table.daemon.relay
            # A game pace larger than the broker takes (a real one is ~3 KB).
            relay.publish_pace(b'{"pace": "' + b"x" * 3000 + b'"}')
            await _until(lambda: "pace" in relay.publishing.too_large)
            table.daemon.post(ChipSensed(seat=1, present=True, since_ns=0))
            await table.wait_backend_caught_up(timeout_s=UNTIL_S)
            # Rows flow on the one connection: no delivery fault, no reconnect.
            assert table.state.delivery_fault is None
            assert relay.counters.connects == 1
            too_large = relay.publishing.too_large
            assert relay.counters.retained_too_large >= len(too_large) >= 1
            status = await table.status()
            shown = {f.cause for f in status.faults if f.what == "message-too-large"}
            for message in too_large.values():
                assert message.size > size and message.limit == size
                assert any(
                    f"retained {message.message} message ({message.size} bytes)" in cause
                    and f"({size} bytes" in cause
                    for cause in shown
                ), shown
            assert len(shown) == len(too_large)
            # What fits went out: status (online) always does.
            assert table.backend.status is not None


@pytest.mark.parametrize(
    ("script", "cause"),
    [
        (Script(max_qos=mqtt5.QoS.AT_MOST_ONCE), "QoS 0 only"),
        (Script(max_packet_size=350), "at most 350 bytes"),
    ],
)
async def test_an_unsuitable_broker_is_a_refusal_said_goodbye_to_with_nothing_sent(
    tmp_path: Path, script: Script, cause: str
) -> None:
    # The table on a scripted broker that says these limits; its backend on Mosquitto.
    with PrivateBroker() as broker:
        async with ScriptedBroker(script) as scripted:
            mqtt: dict[str, object] = {"port": scripted.port, "reconnect_max_s": 1}
            async with simulated_table(broker, tmp_path / "data", mqtt=mqtt) as table:
                relay = table.daemon.relay
                reconnects = relay.reconnector.counters
                await table.daemon.wait_until(lambda s: s.delivery_fault is not None, UNTIL_S)
                await _until(lambda: reconnects.refusals >= 2)
                fault = table.state.delivery_fault
                assert fault is not None and cause in fault, fault
                assert reconnects.failures == reconnects.refusals  # each attempt a refusal
                assert relay.counters.connects == 0
                assert relay.counters.brokers_unsuitable == reconnects.refusals
                # Each connection: CONNECT, then DISCONNECT (no will), nothing published.
                connections = list(scripted.connections)
                assert len(connections) >= 2
                for connection in connections[:-1]:
                    assert connection.publishes() == []
                    assert len(connection.of(mqtt5.DisconnectPacket)) == 1
