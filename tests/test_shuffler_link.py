"""Shuffler driver <-> simulator over a real pseudo-terminal: retries, noise, faults, reboots."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import serial_asyncio_fast
from tablectl.drivers.link import Link, NakError
from tablectl.drivers.protocol import MsgType
from tablectl.drivers.shuffler import ShufflerDriver
from tablectl.simulators.broker import free_port
from tablectl.simulators.shuffler import ShufflerSimulator

from tablectl.config import ShufflerSection
from tablectl.core.events import (
    Event,
    ShuffleCompleted,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
)


class Harness:
    def __init__(self, sim: ShufflerSimulator, driver: ShufflerDriver) -> None:
        self.sim, self.driver = sim, driver
        self.events: asyncio.Queue[Event] = asyncio.Queue()

    async def next_event(self, timeout_s: float = 5) -> Event:
        async with asyncio.timeout(timeout_s):
            return await self.events.get()


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    sim = ShufflerSimulator(shuffle_ms=30, rng=random.Random(3))
    port = sim.open_pty()
    cfg = ShufflerSection(port=port, poll_interval_ms=100, response_timeout_ms=100)
    h = Harness(sim, None)  # type: ignore[arg-type]
    h.driver = ShufflerDriver(cfg, emit=h.events.put_nowait)
    task = asyncio.create_task(h.driver.run())
    async with asyncio.timeout(5):
        await h.driver.wait_link_up()
    yield h
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    sim.close()


async def test_shuffle_reports_a_full_count(harness: Harness) -> None:
    await harness.driver.shuffle()
    assert await harness.next_event() == ShuffleStarted()
    assert await harness.next_event() == ShuffleCompleted(card_count=52)
    assert harness.sim.shuffles == 1


async def test_missing_card_is_reported_as_counted(harness: Harness) -> None:
    harness.sim.remove_card()
    await harness.driver.shuffle()
    assert await harness.next_event() == ShuffleStarted()
    assert await harness.next_event() == ShuffleCompleted(card_count=51)


async def test_lost_reply_is_retried_without_shuffling_twice(harness: Harness) -> None:
    harness.sim.knobs.drop_replies = 2
    executed = harness.sim.requests_executed
    await harness.driver.shuffle()
    assert await harness.next_event() == ShuffleStarted()
    assert await harness.next_event() == ShuffleCompleted(card_count=52)
    assert harness.sim.shuffles == 1
    assert harness.driver.health()["retransmits"] >= 2
    assert harness.sim.requests_executed > executed


async def test_corrupt_reply_and_line_noise_are_counted_and_survived(harness: Harness) -> None:
    harness.sim.knobs.corrupt_replies = 1
    harness.sim.knobs.noise_before_reply = bytes([0x02, 0x01, 0xFF]) + b"\x00garbage\x02"
    harness.sim.write_raw(b"\x02\x02\x02 unsolicited noise \xff\xfe")
    await harness.driver.shuffle()
    assert await harness.next_event() == ShuffleStarted()
    assert await harness.next_event() == ShuffleCompleted(card_count=52)
    health = harness.driver.health()
    assert health["bad_crc"] >= 1 and health["bytes_dropped"] > 10
    assert health["link"] == "up"


async def test_jam_is_reported(harness: Harness) -> None:
    harness.sim.knobs.jam_next_shuffle = True
    await harness.driver.shuffle()
    assert await harness.next_event() == ShuffleStarted()
    assert await harness.next_event() == ShufflerFault(code="jam")


async def test_reboot_is_noticed_and_new_events_are_not_lost(harness: Harness) -> None:
    await harness.driver.shuffle()
    assert await harness.next_event() == ShuffleStarted()
    assert await harness.next_event() == ShuffleCompleted(card_count=52)
    harness.sim.reboot()
    assert await harness.next_event() == ShufflerRebooted()
    await harness.driver.shuffle()
    assert await harness.next_event() == ShuffleStarted()  # event id 1 of the new boot
    assert await harness.next_event() == ShuffleCompleted(card_count=52)


async def test_unknown_request_gets_a_nak() -> None:
    sim = ShufflerSimulator()
    port = sim.open_pty()
    reader, writer = await serial_asyncio_fast.open_serial_connection(url=port, baudrate=115200)
    link = Link(reader, writer, response_timeout_ms=200)
    task = asyncio.create_task(link.read_forever())
    try:
        with pytest.raises(NakError, match="UNKNOWN_TYPE"):
            await link.request(MsgType.STATUS)  # a device-to-host type sent to the device
        reply = await link.request(MsgType.IDENTIFY)
        assert reply.payload == b"tablectl-sim-shuffler/1"
    finally:
        task.cancel()
        writer.close()
        sim.close()


async def test_silent_device_takes_the_link_down() -> None:
    sim = ShufflerSimulator()
    port = sim.open_pty()
    events: list[Event] = []
    cfg = ShufflerSection(
        port=port,
        poll_interval_ms=100,
        response_timeout_ms=50,
        retries=1,
        missed_polls_for_link_down=2,
    )
    driver = ShufflerDriver(cfg, emit=events.append)
    task = asyncio.create_task(driver.run())
    try:
        async with asyncio.timeout(5):
            await driver.wait_link_up()
        sim.knobs.drop_replies = 10_000
        async with asyncio.timeout(5):
            while driver.link_up:  # noqa: ASYNC110 -- the driver exposes a flag, not an event
                await asyncio.sleep(0.05)
        assert driver.health()["link"] == "down"
        sim.knobs.drop_replies = 0
        async with asyncio.timeout(5):
            await driver.wait_link_up()  # polling continued and found it again
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sim.close()


async def test_driver_reaches_a_simulator_over_tcp() -> None:
    """The same frames over socket:// (a simulator in another process, or on another host)."""
    sim = ShufflerSimulator(shuffle_ms=20)
    server = await sim.serve_tcp()
    port = server.sockets[0].getsockname()[1]
    events: asyncio.Queue[Event] = asyncio.Queue()
    driver = ShufflerDriver(ShufflerSection(port=f"socket://127.0.0.1:{port}"), events.put_nowait)
    task = asyncio.create_task(driver.run())
    try:
        async with asyncio.timeout(5):
            await driver.wait_link_up()
            await driver.shuffle()
            assert await events.get() == ShuffleStarted()
            assert await events.get() == ShuffleCompleted(card_count=52)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        server.close()


async def test_simulate_command_serves_a_shuffler_in_another_process() -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("tablectl")),
        "simulate",
        "shuffler",
        "--listen",
        f"127.0.0.1:{port}",
        "--cards",
        "51",
        stdout=asyncio.subprocess.PIPE,
    )
    events: asyncio.Queue[Event] = asyncio.Queue()
    driver = ShufflerDriver(ShufflerSection(port=f"socket://127.0.0.1:{port}"), events.put_nowait)
    task = None
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(10):
            assert b"socket://127.0.0.1" in await proc.stdout.readline()
        task = asyncio.create_task(driver.run())
        async with asyncio.timeout(10):
            await driver.wait_link_up()
            await driver.shuffle()
            assert await events.get() == ShuffleStarted()
            assert await events.get() == ShuffleCompleted(card_count=51)  # the deck it was given
    finally:
        if task:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        proc.terminate()
        await proc.wait()
