"""GPIO backends without GPIO hardware.

The libgpiod backend runs its production path through a fake line request: a real pipe fd
on the event loop carrying the kernel's edge records, decoded into real gpiod.EdgeEvent
objects. Times come from an injected clock shared by the fake chip and the shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import gpiod
import pytest
from tablectl.drivers.gpio.backend import LOCKOUT, Edge, GpioUnavailable
from tablectl.drivers.gpio.gpiod_backend import GpiodBackend, GpiodPollBackend
from tablectl.drivers.gpio.gpiozero_backend import GPIOZERO_REORDER_NS, GpiozeroBackend
from tablectl.drivers.gpio.mock import MockBackend, SimulatorLinkBackend
from tablectl.drivers.gpio.registry import open_backend
from tablectl.drivers.gpio.settings import GpioSettings
from tablectl.drivers.gpio.table_io import SeatInputs, TableGpio
from tablectl.simulators.gpio_chip import KERNEL_EVENT, FakeChip, kernel_event
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.core.effects import Lamp
from tablectl.core.events import ChipSensed, Event, GpioFault, LockoutPressed, LockoutReleased

from .conftest import EXAMPLE_CONFIG

MS = 1_000_000
US = 1_000
T0 = 1_000_000 * MS
# The example table: seats 1..6 on offsets 5, 6, 13, 19, 26, 21; the lock-out on 16.
SEAT_OFFSET = {1: 5, 2: 6, 3: 13, 4: 19, 5: 26, 6: 21}
LOCKOUT_OFFSET = 16
LAMP_OFFSET = {1: 17, 2: 27, 3: 22, 4: 23, 5: 24, 6: 25}


class Clock:
    def __init__(self, tick_ns: int = 0) -> None:
        self.now = T0
        self.tick_ns = tick_ns  # a clock read from threads moves on by itself

    def __call__(self) -> int:
        now = self.now
        self.now += self.tick_ns
        return now

    def advance(self, ns: int) -> None:
        self.now += ns


def gpio_config(**update: object) -> GpioSettings:
    """The example's [gpio] as the drivers are told it, with `update` applied."""
    return load_config(EXAMPLE_CONFIG).gpio.model_copy(update=update).driver_settings()


class WatchedGpio(TableGpio):
    """The shell, saying when a backend has delivered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delivered = asyncio.Event()

    def edges(self, edges: Sequence[Edge]) -> None:
        super().edges(edges)
        self.delivered.set()

    def fault(self, reason: str) -> None:
        super().fault(reason)
        self.delivered.set()

    async def edges_read(self, count: int) -> None:
        """Until `count` edges in all have been delivered (the fd is read on the loop)."""
        async with asyncio.timeout(5):
            while self.edges_seen < count:
                self.delivered.clear()
                await self.delivered.wait()


class Table:
    """The shell on a backend, recording what it gives the core."""

    def __init__(self, backend: GpiodBackend | GpiodPollBackend | MockBackend, clock: Clock):
        self.events: list[Event] = []
        self.clock = clock
        self.gpio = WatchedGpio(
            gpio_config(), backend, seats=6, emit=self.events.append, clock_ns=clock
        )

    async def edges_read(self, count: int) -> None:
        await self.gpio.edges_read(count)

    def settle_after(self, ns: int) -> None:
        self.clock.advance(ns)
        self.gpio.settle()


@contextlib.asynccontextmanager
async def running(
    backend: GpiodBackend | GpiodPollBackend | MockBackend, clock: Clock
) -> AsyncIterator[Table]:
    table = Table(backend, clock)
    table.gpio.start(await backend.open())
    task = asyncio.create_task(table.gpio.run(), name="gpio-under-test")
    await asyncio.sleep(0)  # the backend's task takes its sink
    try:
        yield table
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        table.gpio.close()


def gpiod_backend(chip: FakeChip) -> GpiodBackend:
    cfg = gpio_config()
    return GpiodBackend(
        chip,
        sensors=cfg.seat_sensor_pins,
        lockout=cfg.lockout_pin,
        lamps=cfg.seat_light_pins,
        active_low=cfg.active_low,
    )


# --- libgpiod through the fake line request -------------------------------------------------


def test_the_fake_request_speaks_the_kernels_record_and_gpiods_event() -> None:
    """The pipe carries struct gpio_v2_line_event; what is read back are gpiod's objects."""
    assert KERNEL_EVENT.size == 48
    chip = FakeChip(clock_ns=Clock())
    req = chip.request_inputs([6, 16], active_low=True, edges=True)
    os.write(req._write_fd, kernel_event(123, True, 6, 1, 1) + kernel_event(456, False, 16, 2, 1))
    first, second = req.read_edge_events()
    assert isinstance(first, gpiod.EdgeEvent)
    assert (first.event_type, first.timestamp_ns, first.line_offset, first.global_seqno) == (
        gpiod.EdgeEvent.Type.RISING_EDGE,
        123,
        6,
        1,
    )
    assert second.event_type is gpiod.EdgeEvent.Type.FALLING_EDGE and second.line_seqno == 1
    req.release()


async def test_kernel_stamps_decide_chip_against_lockout_to_the_microsecond() -> None:
    clock = Clock()
    chip = FakeChip(clock_ns=clock)
    async with running(gpiod_backend(chip), clock) as table:
        lockout_at = T0 + 500 * MS
        chip.set_logical(SEAT_OFFSET[2], True, at_ns=T0)  # rests well before the edge
        for t, level in ((0, True), (3, False), (5, True)):  # seat 3 lands, chattering
            chip.set_logical(SEAT_OFFSET[3], level, at_ns=lockout_at - 40 * US + t * US)
        chip.set_logical(LOCKOUT_OFFSET, True, at_ns=lockout_at)
        chip.set_logical(SEAT_OFFSET[4], True, at_ns=lockout_at + 1 * US)  # a µs too late
        chip.set_logical(LOCKOUT_OFFSET, False, at_ns=lockout_at + 80 * MS)
        await table.edges_read(7)
        table.settle_after(700 * MS)
        assert table.events == [
            ChipSensed(seat=2, present=True, since_ns=T0),  # it rested before the edge
            LockoutPressed(
                at_ns=lockout_at, undecided_seats=(3,), resolution_ns=1, resting_seats=(2,)
            ),
            LockoutReleased(at_ns=lockout_at + 80 * MS),
            ChipSensed(seat=3, present=True, since_ns=lockout_at - 40 * US),
            ChipSensed(seat=4, present=True, since_ns=lockout_at + 1 * US),
        ]
        assert table.gpio.faults == 0


async def test_an_exact_tie_with_the_kernel_stamp_is_refused() -> None:
    clock = Clock()
    chip = FakeChip(clock_ns=clock)
    async with running(gpiod_backend(chip), clock) as table:
        chip.set_logical(SEAT_OFFSET[5], True, at_ns=T0 + MS)
        chip.set_logical(LOCKOUT_OFFSET, True, at_ns=T0 + MS)
        await table.edges_read(2)
        (press,) = table.events
        assert isinstance(press, LockoutPressed) and press.undecided_seats == ()


async def test_chips_resting_at_start_up_are_read_from_the_lines() -> None:
    clock = Clock()
    chip = FakeChip(clock_ns=clock)
    chip.set_logical(SEAT_OFFSET[6], True)  # before the request: no edge, only a level
    async with running(gpiod_backend(chip), clock) as table:
        table.settle_after(200 * MS)
        assert table.events == [ChipSensed(seat=6, present=True, since_ns=T0)]


async def test_a_sequence_gap_is_a_fault_and_the_lines_are_read_again() -> None:
    clock = Clock()
    chip = FakeChip(clock_ns=clock)
    async with running(gpiod_backend(chip), clock) as table:
        chip.lose_events = 4  # the kernel's buffer overflowed: seqno 1 to 4 never arrive
        chip.set_logical(SEAT_OFFSET[1], True)
        chip.set_logical(SEAT_OFFSET[1], False)
        chip.set_logical(SEAT_OFFSET[1], True)
        chip.set_logical(SEAT_OFFSET[2], True)
        chip.set_logical(LOCKOUT_OFFSET, True)
        await table.edges_read(1)
        fault, press = table.events
        assert fault == GpioFault(reason="edges lost: sequence 1..4 missing", at_ns=T0)
        assert isinstance(press, LockoutPressed)
        table.settle_after(200 * MS)
        assert table.events[2:] == [
            ChipSensed(seat=1, present=True, since_ns=T0),
            ChipSensed(seat=2, present=True, since_ns=T0),  # found by reading the levels
        ]
        assert table.gpio.status()["last_fault"] == "edges lost: sequence 1..4 missing"


async def test_a_failed_read_is_one_fault_then_reading_resumes() -> None:
    clock = Clock()
    chip = FakeChip(clock_ns=clock)
    backend = gpiod_backend(chip)
    backend.retry_s = 0.001
    async with running(backend, clock) as table:
        assert chip.inputs is not None
        chip.inputs.fail_reads = 2
        chip.set_logical(LOCKOUT_OFFSET, True)
        await table.edges_read(1)
        fault, press = table.events
        assert isinstance(fault, GpioFault) and "edge read failed" in fault.reason
        assert isinstance(press, LockoutPressed) and table.gpio.faults == 1


async def test_lamps_are_a_separate_output_request_and_a_win_blinks() -> None:
    clock = Clock()
    chip = FakeChip(clock_ns=clock)
    async with running(gpiod_backend(chip), clock) as table:
        assert chip.outputs is not None and chip.inputs is not None
        assert sorted(chip.outputs.offsets) == sorted(LAMP_OFFSET.values())
        table.gpio.set_lamp(2, Lamp.ON)
        assert chip.lamp(LAMP_OFFSET[2])
        table.gpio.set_lamp(2, Lamp.OFF)
        assert not chip.lamp(LAMP_OFFSET[2])
        table.gpio.set_lamp(4, Lamp.WIN)
        seen = {chip.lamp(LAMP_OFFSET[4])}
        async with asyncio.timeout(5):
            while len(seen) < 2:  # the blink timer toggles it
                await asyncio.sleep(0.05)
                seen.add(chip.lamp(LAMP_OFFSET[4]))
    assert chip.inputs.released and chip.outputs.released


# --- choosing a backend -----------------------------------------------------------------


async def test_auto_without_any_gpio_chip_names_what_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(GpioUnavailable) as err:
        await open_backend(gpio_config(), seats=6, simulator_socket=tmp_path / "s", chips=[])
    assert str(err.value) == (
        "no GPIO chip: looked for /dev/gpiochip*, found none; without GPIO hardware, set "
        'gpio.backend = "mock" and start `tablectl simulate table --config FILE`'
    )


async def test_auto_polls_a_chip_without_edge_interrupts(tmp_path: Path) -> None:
    chip = FakeChip(clock_ns=Clock())
    chip.edges_supported = False
    backend, _ = await open_backend(
        gpio_config(),
        seats=6,
        simulator_socket=tmp_path,
        chips=[chip.path],
        open_chip=lambda p: chip,
    )
    assert isinstance(backend, GpiodPollBackend) and backend.info.polled
    assert backend.info.resolution_ns == 2 * MS  # poll_period_ms
    backend.close()
    with pytest.raises(GpioUnavailable, match=r'cannot report edges.*"gpiod-poll"'):
        await open_backend(
            gpio_config(backend="gpiod"),
            seats=6,
            simulator_socket=tmp_path,
            chips=[chip.path],
            open_chip=lambda p: chip,
        )


async def test_several_chips_need_gpio_chip_or_line_names(tmp_path: Path) -> None:
    chips = {
        "/dev/gpiochip0": FakeChip("/dev/gpiochip0", lines=8),
        "/dev/gpiochip1": FakeChip(
            "/dev/gpiochip1",
            names={f"SEAT{s}": o for s, o in SEAT_OFFSET.items()}
            | {f"LAMP{s}": o for s, o in LAMP_OFFSET.items()}
            | {"LOCKOUT": LOCKOUT_OFFSET},
        ),
    }
    with pytest.raises(GpioUnavailable, match=r"set gpio\.chip to the chip the sensors"):
        await open_backend(
            gpio_config(),
            seats=6,
            simulator_socket=tmp_path,
            chips=list(chips),
            open_chip=chips.get,  # type: ignore[arg-type]
        )
    named = gpio_config(
        seat_sensor_pins=[f"SEAT{s}" for s in range(1, 7)],
        seat_light_pins=[f"LAMP{s}" for s in range(1, 7)],
        lockout_pin="LOCKOUT",
    )
    backend, _ = await open_backend(
        named, seats=6, simulator_socket=tmp_path, chips=list(chips), open_chip=chips.__getitem__
    )
    assert backend.info.where == "/dev/gpiochip1" and not backend.info.polled
    assert chips["/dev/gpiochip1"].inputs is not None
    assert chips["/dev/gpiochip1"].inputs.offsets == [LOCKOUT_OFFSET, *SEAT_OFFSET.values()]
    backend.close()


# --- the polled backend -------------------------------------------------------------------


async def test_a_polled_chip_stamps_each_change_at_the_read_with_its_interval() -> None:
    clock = Clock()
    chip = FakeChip(clock_ns=clock)
    backend = GpiodPollBackend(
        chip,
        sensors=gpio_config().seat_sensor_pins,
        lockout=LOCKOUT_OFFSET,
        lamps=gpio_config().seat_light_pins,
        active_low=True,
        period_ms=2,
        clock_ns=clock,
    )
    table = Table(backend, clock)
    table.gpio.start(await backend.open())
    chip.set_logical(SEAT_OFFSET[1], True)
    clock.advance(2 * MS)
    backend.poll(table.gpio)  # seat 1 seen one read before the button: it counts
    chip.set_logical(SEAT_OFFSET[2], True)  # the same read as the button: a tie, refused
    chip.set_logical(LOCKOUT_OFFSET, True)
    clock.advance(3 * MS)  # a late read: the interval is the resolution
    backend.poll(table.gpio)
    assert table.events == [
        LockoutPressed(
            at_ns=T0 + 5 * MS, undecided_seats=(1,), resolution_ns=3 * MS, resting_seats=()
        )
    ]
    table.settle_after(200 * MS)
    assert table.events[1:] == [
        ChipSensed(seat=1, present=True, since_ns=T0 + 2 * MS),
        ChipSensed(seat=2, present=True, since_ns=T0 + 5 * MS),
    ]
    assert table.gpio.coarsest_resolution_ns == 3 * MS
    assert chip.inputs is not None
    chip.inputs.fail_reads = 1
    backend.poll(table.gpio)
    assert isinstance(table.events[-1], GpioFault) and "line read failed" in str(table.events[-1])
    table.gpio.close()


# --- the mock backend: scripted edges ---------------------------------------------------


def chip_edge(seat: int, level: bool, t_ns: int, seq: int | None = None) -> Edge:
    return Edge(seat, level, t_ns, seq, 1)


def press(t_ns: int, seq: int | None = None) -> Edge:
    return Edge(LOCKOUT, True, t_ns, seq, 1)


async def test_a_bounce_burst_is_one_chip_stamped_at_its_first_touch() -> None:
    clock = Clock()
    backend = MockBackend(6)
    async with running(backend, clock) as table:
        burst = [chip_edge(1, i % 2 == 0, T0 + i * 300 * US) for i in range(9)]
        backend.deliver(*burst)
        table.settle_after(100 * MS)
        assert table.events == []  # the last contact was 2.4 ms ago: still settling
        table.settle_after(60 * MS)
        assert table.events == [ChipSensed(seat=1, present=True, since_ns=T0)]


async def test_a_lockout_a_microsecond_before_a_chip() -> None:
    clock = Clock()
    backend = MockBackend(6)
    async with running(backend, clock) as table:
        backend.deliver(chip_edge(2, True, T0 - US), press(T0), chip_edge(3, True, T0 + US))
        table.settle_after(200 * MS)
        assert table.events[0] == LockoutPressed(at_ns=T0, undecided_seats=(2,), resting_seats=())


async def test_out_of_order_arrival_is_decided_by_the_stamps_on_the_safe_side() -> None:
    """A chip edge that reaches the loop after the lock-out was handled (gpiozero's threads
    give no order) cannot join the count: it is never recognised, even if stamped earlier."""
    clock = Clock()
    backend = MockBackend(6)
    async with running(backend, clock) as table:
        backend.deliver(press(T0), chip_edge(4, True, T0 - 5 * MS))
        table.settle_after(200 * MS)
        assert table.events == [
            LockoutPressed(at_ns=T0, undecided_seats=(), resting_seats=()),
            ChipSensed(seat=4, present=True, since_ns=T0 - 5 * MS),
        ]


def test_sequence_numbers_out_of_order_or_missing_are_faults() -> None:
    inputs = SeatInputs(6, chip_present_ms=150, lockout_debounce_ms=50)
    inputs.resync({}, T0, seq=10)
    assert inputs.take([chip_edge(1, True, T0, seq=11)]) == []
    (gap,) = inputs.take([chip_edge(1, False, T0 + 1, seq=14)])
    assert gap == GpioFault(reason="edges lost: sequence 12..13 missing", at_ns=T0 + 1)
    (back,) = inputs.take([chip_edge(2, True, T0 + 2, seq=13)])
    assert back == GpioFault(reason="edge out of sequence: 13 after 14", at_ns=T0 + 2)
    assert inputs.take([chip_edge(2, False, T0 + 3, seq=15)]) == []


async def test_the_sequence_check_survives_the_re_read_after_a_fault() -> None:
    """After a gap the levels are read again; the next edge out of sequence is still a fault
    (the re-read used to forget the last number, and that edge went unnoticed once)."""
    clock = Clock()
    backend = MockBackend(6)
    async with running(backend, clock) as table:
        backend.deliver(chip_edge(1, True, T0 + 1, seq=1))
        backend.deliver(chip_edge(1, False, T0 + 2, seq=4))  # 2 and 3 lost: re-read
        backend.deliver(chip_edge(3, True, T0 + 3, seq=3))  # out of sequence
        backend.deliver(chip_edge(3, False, T0 + 4, seq=5))
        faults = [e.reason for e in table.events if isinstance(e, GpioFault)]
        assert faults == [
            "edges lost: sequence 2..3 missing",
            "edge out of sequence: 3 after 4",
        ]


async def test_a_chip_stamped_back_in_time_is_decided_once() -> None:
    """A resting wager's sensor reports an opening stamped before its own last closing (a
    timestamp glitch; the chip never moved): a fault, and the chip is decided once -- never
    published accepted, then withdrawn, then found again when the lines are read."""
    from tablectl.core import effects as rec
    from tablectl.core.table import step

    from .test_table_core import RULES, opened, records, run

    clock = Clock()
    backend = MockBackend(6)
    async with running(backend, clock) as table:
        backend.deliver(chip_edge(2, True, T0 + MS, seq=1))
        table.settle_after(200 * MS)
        # The glitched edge, delivered as the kernel would; the line still reads closed.
        table.gpio.edges([chip_edge(2, False, T0 - 10 * MS, seq=2)])
        table.settle_after(400 * MS)
        (fault,) = [e for e in table.events if isinstance(e, GpioFault)]
        assert "seat 2's edge stamped 11000000 ns before its previous edge" in fault.reason
        chips = [e for e in table.events if isinstance(e, ChipSensed)]
        assert chips == [ChipSensed(seat=2, present=True, since_ns=T0 + MS)]
    state, fx = run(opened())
    for event in table.events:
        state, more = step(RULES, state, event)
        fx += more
    assert [r.seat for r in records(fx, rec.WagerAccepted)] == [2]
    assert records(fx, rec.WagerWithdrawn) == []
    assert state.wagers == {2: 100} and state.gpio_fault is not None


# --- gpiozero (Raspberry Pi): callbacks from its threads ----------------------------------


async def test_gpiozero_callbacks_from_its_threads_reach_the_loop() -> None:
    from gpiozero.pins.mock import MockFactory

    factory = MockFactory()
    cfg = gpio_config()
    clock = Clock(tick_ns=US)
    backend = GpiozeroBackend(
        sensors=cfg.seat_sensor_pins,
        lockout=cfg.lockout_pin,
        lamps=cfg.seat_light_pins,
        active_low=True,
        pin_factory=factory,
        clock_ns=clock,
    )
    table = Table(backend, clock)  # type: ignore[arg-type]
    table.gpio.start(await backend.open())
    task = asyncio.create_task(table.gpio.run())
    main_thread = threading.get_ident()
    threads: set[int] = set()

    def drive() -> None:
        threads.add(threading.get_ident())
        for pin in (5, 13, 21):  # seats 1, 3, 6 (active low)
            factory.pin(pin).drive_low()
        factory.pin(16).drive_low()

    await asyncio.to_thread(drive)
    await table.edges_read(4)
    assert main_thread not in threads
    assert table.events == []  # an edge stamped before the press may still be on its way
    table.settle_after(GPIOZERO_REORDER_NS)
    (pressed,) = table.events
    assert isinstance(pressed, LockoutPressed) and pressed.resolution_ns == MS
    assert pressed.undecided_seats == ()  # stamped within a millisecond: refused as ties
    table.gpio.set_lamp(3, Lamp.ON)
    assert factory.pin(22).state
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    table.gpio.close()


# --- the mock backend across processes: `tablectl simulate table`'s socket ------------------


async def test_the_simulated_table_across_a_socket_edges_lamps_and_a_pulled_cable(
    tmp_path: Path,
) -> None:
    sim = SimulatedTableInputs(6)
    sim.place_chip(5)  # resting before the daemon connects
    path = tmp_path / "sim.sock"
    server = await sim.serve(path)
    link = SimulatorLinkBackend(path, 6)
    events: list[Event] = []
    arrived = asyncio.Event()

    def emit(event: Event) -> None:
        events.append(event)
        arrived.set()

    gpio = TableGpio(gpio_config(chip_present_ms=10), link, seats=6, emit=emit)
    gpio.start(await link.open())
    task = asyncio.create_task(gpio.run())

    async def next_event(kind: type[Event]) -> Event:
        async with asyncio.timeout(5):
            while not any(isinstance(e, kind) for e in events):
                arrived.clear()
                await arrived.wait()
        found = next(e for e in events if isinstance(e, kind))
        events.remove(found)
        return found

    chip = await next_event(ChipSensed)
    assert chip == ChipSensed(seat=5, present=True, since_ns=chip.since_ns)  # type: ignore[union-attr]
    lit = asyncio.Event()
    sim.on_lamp = lambda seat, on: lit.set() if (seat, on) == (5, True) else None
    gpio.set_lamp(5, Lamp.ON)
    async with asyncio.timeout(5):
        await lit.wait()
    assert sim.light_is_on(5)
    sim.press_lockout()
    pressed = await next_event(LockoutPressed)
    assert isinstance(pressed, LockoutPressed) and pressed.resolution_ns == 1

    sim.drop_edges = 1
    sim.remove_chip(5)  # lost: seq gap
    sim.place_chip(2)
    fault = await next_event(GpioFault)
    assert isinstance(fault, GpioFault) and "edges lost" in fault.reason

    sim.unplug()
    fault = await next_event(GpioFault)
    assert isinstance(fault, GpioFault) and "link to the simulated table" in fault.reason
    sim.plug()
    sim.place_chip(3)
    placed = await next_event(ChipSensed)
    while isinstance(placed, ChipSensed) and placed.seat != 3:
        placed = await next_event(ChipSensed)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    gpio.close()
    server.close()


# --- the kernel's gpio-sim, where it exists -----------------------------------------------

GPIO_SIM = Path("/sys/kernel/config/gpio-sim")


def _gpio_sim_missing() -> str | None:
    if os.geteuid() != 0:
        return "gpio-sim needs root"
    if not GPIO_SIM.is_dir():
        return f"no {GPIO_SIM}: configfs is not mounted or the gpio-sim module is not loaded"
    return None


@pytest.mark.skipif(_gpio_sim_missing() is not None, reason=str(_gpio_sim_missing()))
async def test_gpiod_against_the_kernels_gpio_sim(tmp_path: Path) -> None:
    """A real chip: gpio-sim lines pulled through sysfs, edges stamped by the kernel."""
    from tablectl.drivers.gpio.gpiod_backend import GpiodChip

    device = GPIO_SIM / f"tablectl-{os.getpid()}"
    bank = device / "bank0"
    bank.mkdir(parents=True)
    try:
        (bank / "num_lines").write_text("32")
        (device / "live").write_text("1")
        chip_name = (bank / "chip_name").read_text().strip()
        dev_name = (device / "dev_name").read_text().strip()
        pulls = Path("/sys/devices/platform") / dev_name / chip_name

        def pull(offset: int, up: bool) -> None:
            (pulls / f"sim_gpio{offset}" / "pull").write_text("pull-up" if up else "pull-down")

        for offset in range(32):
            pull(offset, True)  # active low: idle high
        backend = GpiodBackend(
            GpiodChip(f"/dev/{chip_name}"),
            sensors=[5, 6, 13, 19, 26, 21],
            lockout=16,
            lamps=[17, 27, 22, 23, 24, 25],
            active_low=True,
        )
        events: list[Event] = []
        gpio = WatchedGpio(gpio_config(), backend, seats=6, emit=events.append)
        gpio.start(await backend.open())
        task = asyncio.create_task(gpio.run())
        pull(6, False)  # a chip on seat 2
        pull(16, False)  # the lock-out
        await gpio.edges_read(2)
        (pressed,) = events
        assert isinstance(pressed, LockoutPressed) and pressed.undecided_seats == (2,)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        gpio.close()
    finally:
        (device / "live").write_text("0")
        bank.rmdir()
        device.rmdir()


async def test_the_simulated_table_link_retries_a_missing_table_soon_and_a_wrong_one_last(
    tmp_path: Path,
) -> None:
    # The one reconnect component: a table not there (the simulator restarting) is a network
    # failure, retried within the first backoff; a table of another size will not become
    # ours by waiting: the longest backoff, one error.
    path = tmp_path / "sim.sock"
    six = SimulatedTableInputs(6)
    server = await six.serve(path)
    link = SimulatorLinkBackend(path, 6)
    faults: list[str] = []

    class Faults:
        """What the link tells the table's GPIO: only its faults matter here."""

        def edges(self, edges: Sequence[Edge]) -> None: ...
        def resync(self, levels: Any, t_ns: int, seq: int | None = None) -> None: ...
        def fault(self, reason: str) -> None:
            faults.append(reason)

    await link.open()
    task = asyncio.create_task(link.run(Faults()))
    loop = asyncio.get_running_loop()

    async def until(condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(10):
            while not condition():  # noqa: ASYNC110 (the reconnector's counters have no event)
                await asyncio.sleep(0.01)

    try:
        server.close()
        six.unplug()
        await until(lambda: link.reconnector.counters.failures >= 1)
        assert faults and "link to the simulated table" in faults[0]
        assert link.reconnector.counters.refusals == 0
        assert link.reconnector.next_attempt_at is not None
        assert link.reconnector.next_attempt_at - loop.time() <= 0.5  # soon
        server = await SimulatedTableInputs(7).serve(path)
        await until(lambda: link.reconnector.counters.refusals >= 1)
        assert "not a simulated 6-seat table" in (link.reconnector.last_error or "")
        assert link.reconnector.next_attempt_at is not None
        assert link.reconnector.next_attempt_at - loop.time() > 3.0  # the longest (5 s +-20 %)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        link.close()
        server.close()
