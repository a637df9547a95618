"""The same link over the real transports: USB through pyusb (a virtual bus), a pty, TCP,
and the simulators in another process (`tablectl simulate`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
import time
import tty
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tablectl.drivers.api import DeviceReport
from tablectl.drivers.reference.framing import Frame, FrameParser
from tablectl.drivers.reference.link import LinkSettings, PolledDevice
from tablectl.drivers.reference.messages import Identity, MsgType, encode_poll
from tablectl.drivers.reference.shoe_codec import ShoeState
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.drivers.transport.base import TraceWriter, TransportClosed, TransportUnavailable
from tablectl.drivers.transport.serial import SerialConnector
from tablectl.drivers.transport.socket import SocketConnector
from tablectl.drivers.transport.usb import UsbAddress, UsbConnector
from tablectl.simulators.broker import PrivateBroker, free_port
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.shoe import PRODUCT_ID, VENDOR_ID, ShoeSimulator, VirtualUsbBackend
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl import cli
from tablectl.config import load_config
from tablectl.core.events import (
    DeviceIdentified,
    Event,
    ShoeCard,
    ShoeDealCompleted,
    ShoeFault,
    ShoeStackDealt,
    ShuffleCompleted,
    ShuffleStarted,
)
from tablectl.service.daemon import Daemon

from .conftest import EXAMPLE_CONFIG

SETTINGS = LinkSettings(poll_interval_ms=100, response_timeout_ms=200)
TABLECTL = Path(sys.executable).with_name("tablectl")


class Inbox:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[DeviceReport] = asyncio.Queue()
        self.driver: PolledDevice | None = None

    def __call__(self, report: DeviceReport) -> None:
        self.queue.put_nowait(report)
        assert self.driver is not None
        self.driver.acknowledge(report)

    async def until(self, kind: type[Event], timeout_s: float = 10) -> Event:
        async with asyncio.timeout(timeout_s):
            while True:
                event = (await self.queue.get()).input
                if isinstance(event, kind):
                    return event


@contextlib.asynccontextmanager
async def running(driver: PolledDevice) -> AsyncIterator[PolledDevice]:
    task = asyncio.create_task(driver.run())
    try:
        async with asyncio.timeout(10):
            await driver.wait_link_up()
        yield driver
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def usb_shoe(
    backend: VirtualUsbBackend, inbox: Inbox, serial: str | None = "SHOE-0001"
) -> ReferenceShoe:
    connector = UsbConnector(UsbAddress(VENDOR_ID, PRODUCT_ID, serial), backend=backend)
    shoe = ReferenceShoe(connector, inbox, SETTINGS)
    inbox.driver = shoe
    return shoe


async def test_the_shoe_deals_over_usb_through_pyusb() -> None:
    sim = ShoeSimulator(card_ms=1, rng=random.Random(3))
    backend = VirtualUsbBackend()
    backend.plug(sim, asyncio.get_running_loop())
    inbox = Inbox()
    async with running(usb_shoe(backend, inbox)) as shoe:
        assert isinstance(shoe, ReferenceShoe)
        assert shoe.health()["serial_number"] == "SHOE-0001"  # IDENTIFY over bulk transfers
        expected = sim.shoe[:6]
        await shoe.deal((3, 3))
        cards = []
        for _ in range(2):
            for _ in range(3):
                card = await inbox.until(ShoeCard)
                assert isinstance(card, ShoeCard)
                cards.append(card.card)
            assert await inbox.until(ShoeStackDealt) == ShoeStackDealt(cards=3)
        assert await inbox.until(ShoeDealCompleted) == ShoeDealCompleted(cards=6)
        assert cards == expected


async def test_a_usb_write_goes_out_while_the_reader_waits_in_a_read() -> None:
    """The reader sits in a read that would time out only after ten minutes: each request
    still goes out at once and its reply comes back. (When one thread did both, a write went
    out only between reads: here, never.)"""
    backend = VirtualUsbBackend()
    vdev = backend.plug(ShoeSimulator(), asyncio.get_running_loop())
    connector = UsbConnector(
        UsbAddress(VENDOR_ID, PRODUCT_ID), backend=backend, read_timeout_ms=600_000
    )
    conn = await connector.connect()
    parser = FrameParser()
    try:
        async with asyncio.timeout(30):  # a hang guard, not a timing claim
            for seq in (1, 2, 3):
                conn.write(Frame(1, seq, MsgType.POLL, encode_poll(0, 0)).encode())
                frames: list[Frame] = []
                while not frames:
                    frames = parser.feed(await conn.read())
                assert [(f.seq, f.type) for f in frames] == [(seq, MsgType.STATUS)]
    finally:
        closing = asyncio.create_task(conn.close())
        await asyncio.sleep(0)  # close has told the reader to stop; it sees so when its read
        vdev.from_device.put((time.perf_counter(), b""))  # returns (an empty transfer)
        await closing


async def test_unplugging_the_shoe_mid_deal_and_plugging_it_back_loses_no_card() -> None:
    sim = ShoeSimulator(card_ms=20, rng=random.Random(4))
    backend = VirtualUsbBackend()
    loop = asyncio.get_running_loop()
    vdev = backend.plug(sim, loop)
    inbox = Inbox()
    async with running(usb_shoe(backend, inbox)) as shoe:
        assert isinstance(shoe, ReferenceShoe)
        await shoe.deal((3, 3))
        await inbox.until(ShoeCard)
        backend.unplug(vdev)  # ENODEV in the worker thread
        async with asyncio.timeout(10):  # the link goes down; the shoe deals on, holding them
            while shoe.link_up or sim.state is ShoeState.DEALING:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert sim.dealt == 6
        backend.plug(sim, loop)
        plugged = loop.time()
        await shoe.wait_link_up()
        assert loop.time() - plugged < 2.0
        assert await inbox.until(ShoeDealCompleted) == ShoeDealCompleted(cards=6)
        assert shoe.health()["reconnects"] >= 1


async def test_with_the_configured_serial_missing_a_replacement_of_the_model_is_opened() -> None:
    # 14.6: usb:VVVV:PPPP:SERIAL names the shoe expected; a replacement (another serial
    # number) is opened all the same, and its identity tells the core, which holds it until
    # a technician accepts it -- as on a serial port.
    loop = asyncio.get_running_loop()
    other = ShoeSimulator(identity=Identity("tablectl-sim-shoe", "SHOE-0002", "1.0"))
    backend = VirtualUsbBackend()
    backend.plug(other, loop)
    inbox = Inbox()
    async with running(usb_shoe(backend, inbox, serial="SHOE-0001")):
        ident = await inbox.until(DeviceIdentified)
        assert isinstance(ident, DeviceIdentified) and ident.serial_number == "SHOE-0002"
    # The configured one, when it is there too, is the one opened.
    configured = backend.plug(ShoeSimulator(), loop)
    connector = UsbConnector(UsbAddress(VENDOR_ID, PRODUCT_ID, "SHOE-0001"), backend=backend)
    conn = await connector.connect()
    assert configured.opened == 1
    await conn.close()
    # Two of the model and the port names neither: none is guessed.
    third = UsbConnector(UsbAddress(VENDOR_ID, PRODUCT_ID, "SHOE-0009"), backend=backend)
    with pytest.raises(
        TransportUnavailable, match=r"2 devices of this model \(SHOE-0001, SHOE-0002\)"
    ):
        await third.connect()
    with pytest.raises(TransportUnavailable, match="no such device"):
        await UsbConnector(UsbAddress(VENDOR_ID, 0x0BAD), backend=backend).connect()


async def test_a_jam_reported_over_usb(tmp_path: Path) -> None:
    sim = ShoeSimulator(card_ms=1, rng=random.Random(5))
    sim.knobs.jam_at = 1
    backend = VirtualUsbBackend()
    backend.plug(sim, asyncio.get_running_loop())
    inbox = Inbox()
    trace_path = tmp_path / "shoe.trace"
    shoe = usb_shoe(backend, inbox)
    shoe.trace = TraceWriter.open(trace_path, "shoe test")
    async with running(shoe):
        await shoe.deal((3,))
        assert await inbox.until(ShoeFault) == ShoeFault(code="jam")
    shoe.trace.close()
    lines = trace_path.read_text().splitlines()
    assert lines[0].split(" ", 2)[1] == "#" and any(" > " in line for line in lines)
    assert any(" < " in line for line in lines)  # both directions, with times


async def test_the_shuffler_on_a_real_pty() -> None:
    sim = ShufflerSimulator(shuffle_ms=20, rng=random.Random(6))
    inbox = Inbox()
    driver = ReferenceShuffler(SerialConnector(sim.open_pty(), 115200), inbox, SETTINGS)
    inbox.driver = driver
    try:
        async with running(driver):
            sim.line.noise = b"\x02\x02 noise \xff"
            await driver.shuffle()
            assert await inbox.until(ShuffleStarted) == ShuffleStarted()
            assert await inbox.until(ShuffleCompleted) == ShuffleCompleted(card_count=52)
    finally:
        sim.close()


async def test_the_pty_is_opened_exclusively() -> None:
    sim = ShufflerSimulator(rng=random.Random(7))
    port = sim.open_pty()
    try:
        first = await SerialConnector(port, 115200).connect()
        with pytest.raises(TransportUnavailable):
            await SerialConnector(port, 115200).connect()
        await first.close()
        again = await SerialConnector(port, 115200).connect()
        await again.close()
    finally:
        sim.close()


async def test_a_closed_simulators_port_leads_nowhere() -> None:
    """The kernel gives /dev/pts/N to the next pseudo-terminal opened anywhere: a daemon
    reconnecting to a closed simulator must not reach another's (it took that one's events
    in a full test run). Its port is a link of its own, removed as it closes."""
    sim = ShufflerSimulator(rng=random.Random(8))
    port = sim.open_pty()
    assert os.readlink(port).startswith("/dev/pts/")
    first = await SerialConnector(port, 115200).connect()
    await first.close()
    sim.close()
    assert not os.path.lexists(port)  # noqa: ASYNC240 -- a test's one look
    with pytest.raises(TransportUnavailable):
        await SerialConnector(port, 115200).connect()


@contextlib.contextmanager
def pty_pair() -> Iterator[tuple[int, str]]:
    """A bare pseudo-terminal: its master's fd, and the path a serial connector opens."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        yield master, os.ttyname(slave)
    finally:
        os.close(master)
        os.close(slave)


async def master_reads(master: int, size: int) -> bytes:
    """What the device end reads, until size bytes came."""
    got = b""
    async with asyncio.timeout(5):
        while len(got) < size:
            await asyncio.sleep(0.001)
            with contextlib.suppress(BlockingIOError):
                got += os.read(master, 65536)
    return got


async def test_a_serial_port_queues_what_comes_before_it_is_pushed_then_pushes() -> None:
    with pty_pair() as (master, path):
        conn = await SerialConnector(path, 115200).connect()
        try:
            os.write(master, b"early")
            async with asyncio.timeout(5):
                assert await conn.read() == b"early"
            os.write(master, b"queued")
            await asyncio.sleep(0.05)  # (read by the port's callback, not by read())
            pushed: list[bytes] = []
            more = asyncio.Event()

            def receive(data: bytes) -> None:
                pushed.append(data)
                more.set()

            conn.push_to(receive)
            async with asyncio.timeout(5):
                await more.wait()
            assert pushed == [b"queued"]  # what came before push_to, once and first
            more.clear()
            os.write(master, b"pushed")
            async with asyncio.timeout(5):
                await more.wait()
            assert pushed == [b"queued", b"pushed"]
        finally:
            await conn.close()


async def test_a_serial_write_the_port_cannot_take_at_once_goes_out_as_it_can() -> None:
    """A pty takes a few kilobytes until its other end reads: the rest waits, in order,
    and drain() returns once the port has taken it all."""
    with pty_pair() as (master, path):
        conn = await SerialConnector(path, 115200).connect()
        try:
            data = bytes(range(256)) * 256  # 64 KiB: far more than a pty holds
            conn.write(data)
            conn.write(b"and after")
            draining = asyncio.create_task(conn.drain())
            await asyncio.sleep(0)
            assert not draining.done()  # the pty is full: it waits
            assert await master_reads(master, len(data) + 9) == data + b"and after"
            async with asyncio.timeout(5):
                await draining
        finally:
            await conn.close()


async def test_a_serial_port_whose_device_end_closes_ends_the_connection() -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    conn = await SerialConnector(os.ttyname(slave), 115200).connect()
    try:
        os.close(slave)
        os.close(master)  # the device is gone: the port reads EIO
        with pytest.raises(TransportClosed):
            async with asyncio.timeout(5):
                await conn.read()
        with pytest.raises(TransportClosed):
            conn.write(b"anything")
    finally:
        await conn.close()


async def test_a_receiver_that_fails_ends_the_connection_with_its_error() -> None:
    """A bug in what the bytes are pushed to ends the link's reader with it, as it did when
    the reader read them itself, rather than being logged by the loop and forgotten."""
    with pty_pair() as (master, path):
        conn = await SerialConnector(path, 115200).connect()
        try:

            def receive(data: bytes) -> None:
                raise ZeroDivisionError(data)

            conn.push_to(receive)
            os.write(master, b"boom")
            with pytest.raises(ZeroDivisionError):
                async with asyncio.timeout(5):
                    await conn.read()
        finally:
            await conn.close()


async def test_a_serial_url_without_a_device_is_unavailable() -> None:
    with pytest.raises(TransportUnavailable, match="not a serial device"):
        await SerialConnector("loop://", 115200).connect()


@pytest.mark.parametrize("device", ["shuffler", "shoe"])
async def test_simulate_serves_a_device_in_another_process(device: str) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        str(TABLECTL), "simulate", device, "--listen", f"127.0.0.1:{port}",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    inbox = Inbox()
    connector = SocketConnector(f"socket://127.0.0.1:{port}")
    driver: PolledDevice = (
        ReferenceShoe(connector, inbox, SETTINGS)
        if device == "shoe"
        else ReferenceShuffler(connector, inbox, SETTINGS)
    )
    inbox.driver = driver
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(10):
            assert b"socket://127.0.0.1" in await proc.stdout.readline()
        async with running(driver):
            if isinstance(driver, ReferenceShoe):
                await driver.deal((2,))
                assert await inbox.until(ShoeDealCompleted) == ShoeDealCompleted(cards=2)
            else:
                assert isinstance(driver, ReferenceShuffler)
                await driver.shuffle()
                assert await inbox.until(ShuffleCompleted) == ShuffleCompleted(card_count=52)
    finally:
        proc.terminate()
        await proc.wait()


async def test_a_replacement_usb_shoe_is_held_until_a_technician_accepts_it(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The daemon on the documented port form with a serial number (14.6): the shoe is
    # unplugged, another of the model (another serial number) is plugged in its place.
    loop = asyncio.get_running_loop()
    bus = VirtualUsbBackend()
    first = bus.plug(ShoeSimulator(), loop)
    shuffler = ShufflerSimulator(shuffle_ms=20)
    config = simulated_config(
        load_config(EXAMPLE_CONFIG),
        port=shuffler.open_pty(),
        broker=broker,
        data_dir=tmp_path / "data",
        shoe_port=f"usb:{VENDOR_ID:04x}:{PRODUCT_ID:04x}:SHOE-0001",
    )
    daemon = Daemon(
        config, gpio_backend=SimulatedTableInputs(config.table.seats).backend(), usb_backend=bus
    )
    task = asyncio.create_task(daemon.run())
    try:
        await daemon.wait_until(lambda s: s.devices.get("shoe") == "SHOE-0001", 10)
        bus.unplug(first)
        replacement = ShoeSimulator(identity=Identity("tablectl-sim-shoe", "SHOE-0002", "1.0"))
        bus.plug(replacement, loop)
        await daemon.wait_until(lambda s: s.devices_pending.get("shoe") == "SHOE-0002", 10)
        sock = str(config.storage.socket_path)
        accept = ["devices", "accept", "shoe", "SHOE-0002", "--by", "tech-9", "--socket", sock]
        assert await asyncio.to_thread(cli.main, accept) == 0, capsys.readouterr().err
        await daemon.wait_until(lambda s: s.devices.get("shoe") == "SHOE-0002", 10)
        assert daemon.store is not None
        (accepted,) = [r for r in daemon.store.rows_after(0, 10_000) if r.type == "device.accepted"]
        by = accepted.data.pop("by")
        assert by.startswith("tech-9 (")  # who said so, and the user the kernel vouches for
        assert accepted.data == {
            "device": "shoe",
            "serial_number": "SHOE-0002",
            "replaces": "SHOE-0001",
        }
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        shuffler.close()
