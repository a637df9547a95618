"""GPIO edges: edge -> decision latency and the refusal window, per backend.

The libgpiod backend runs its production path through the fake line request (a real pipe
carrying the kernel's edge records, decoded into gpiod.EdgeEvent objects: simulators/
gpio_chip.py); the polled backend reads the same fake chip's levels. The baseline, on the
same pipe in the same run, is a bare `os.read` of one record woken by the same event loop.

- latency: a lock-out edge written to the chip -> the LockoutPressed the core steps on;
  polled: the level changes at a random moment of the poll period -> the same decision.
- refusal window: chips land at random offsets around the lock-out edge and go through the
  backend, SeatInputs and the round core; the window is the longest time before the edge
  at which a chip that stayed was still refused (a tie, 649a.2(c)(2)). Late chips accepted
  must be 0.

Run: .venv/bin/python bench/gpio_edges.py [--samples N] [--trials N] [--repeats R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from collections.abc import Callable

from figures import spread
from lockout_window import RULES
from tablectl.drivers.gpio.gpiod_backend import GpiodBackend, GpiodPollBackend
from tablectl.drivers.gpio.table_io import TableGpio
from tablectl.simulators.gpio_chip import FakeChip, kernel_event

from tablectl.config import GpioSection
from tablectl.core.events import (
    ChipSensed,
    Event,
    LockoutPressed,
    PowerUp,
    ShuffleCompleted,
    ShuffleStarted,
)
from tablectl.core.table import TableState, step
from tablectl.util import logs

MS, US = 1_000_000, 1_000
SEATS: list[int | str] = [5, 6, 13, 19, 26, 21]
LOCKOUT = 16
LAMPS: list[int | str] = [17, 27, 22, 23, 24, 25]
POLL_MS = 2
GPIO = GpioSection(
    backend="gpiod",
    seat_sensor_pins=SEATS,
    seat_light_pins=LAMPS,
    lockout_pin=LOCKOUT,
    chip_present_ms=150,
    lockout_debounce_ms=0,
    poll_period_ms=POLL_MS,
).driver_settings()


def gpiod(chip: FakeChip) -> GpiodBackend:
    return GpiodBackend(chip, sensors=SEATS, lockout=LOCKOUT, lamps=LAMPS, active_low=True)


def polled(chip: FakeChip, clock: Callable[[], int] = time.monotonic_ns) -> GpiodPollBackend:
    return GpiodPollBackend(
        chip,
        sensors=SEATS,
        lockout=LOCKOUT,
        lamps=LAMPS,
        active_low=True,
        period_ms=POLL_MS,
        clock_ns=clock,
    )


async def raw_read(samples: int) -> list[float]:
    """The baseline: one kernel record through a pipe, read by os.read when the loop wakes."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    out: list[float] = []
    try:
        for _ in range(samples):
            done: asyncio.Future[int] = loop.create_future()

            def readable(fut: asyncio.Future[int] = done) -> None:
                os.read(read_fd, 48)
                loop.remove_reader(read_fd)
                fut.set_result(time.perf_counter_ns())

            loop.add_reader(read_fd, readable)
            t0 = time.perf_counter_ns()
            os.write(write_fd, kernel_event(t0, True, LOCKOUT, 1, 1))
            out.append((await done - t0) / US)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    return out


async def decision_latency(samples: int, use_poll: bool) -> list[float]:
    """A lock-out edge at the chip -> LockoutPressed, through the backend and SeatInputs."""
    chip = FakeChip()
    if use_poll:
        chip.edges_supported = False
    backend: GpiodBackend | GpiodPollBackend = polled(chip) if use_poll else gpiod(chip)
    loop = asyncio.get_running_loop()
    decided: list[asyncio.Future[int]] = []

    def emit(event: Event) -> None:
        if isinstance(event, LockoutPressed) and decided and not decided[-1].done():
            decided[-1].set_result(time.perf_counter_ns())

    gpio = TableGpio(GPIO, backend, seats=6, emit=emit)
    gpio.start(await backend.open())
    task = asyncio.create_task(gpio.run())
    out: list[float] = []
    rng = random.Random(1)
    for _ in range(samples):
        decided.append(loop.create_future())
        if use_poll:
            # The button is pressed at a moment of its own, not on the loop's timer ticks.
            delay_s = rng.uniform(0, POLL_MS / 1000)

            def press(delay_s: float = delay_s) -> int:
                time.sleep(delay_s)
                t0 = time.perf_counter_ns()
                chip.set_logical(LOCKOUT, True)
                return t0

            t0 = await asyncio.to_thread(press)
        else:
            t0 = time.perf_counter_ns()
            chip.set_logical(LOCKOUT, True)
        out.append((await decided[-1] - t0) / US)
        chip.set_logical(LOCKOUT, False)
        if use_poll:  # released long enough for a read to see it
            await asyncio.sleep(3 * POLL_MS / 1000)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    gpio.close()
    return out


def betting() -> TableState:
    state = TableState.initial(RULES)
    for event in (PowerUp(rules=RULES), ShuffleStarted(), ShuffleCompleted(card_count=52)):
        state, _ = step(RULES, state, event)
    return state


class Clock:
    now = 10**12

    def __call__(self) -> int:
        return self.now


async def refusal_window(trials: int, seed: int, use_poll: bool) -> tuple[float, int]:
    """(window in ms, late chips accepted) over `trials` chips around one edge each."""
    rng = random.Random(seed)
    base = betting()
    refused_before: list[int] = []
    late_accepted = 0
    for _ in range(trials):
        clock = Clock()
        chip = FakeChip(clock_ns=clock)
        events: list[Event] = []
        if use_poll:
            chip.edges_supported = False
            backend: GpiodBackend | GpiodPollBackend = polled(chip, clock)
        else:
            backend = gpiod(chip)
        gpio = TableGpio(GPIO, backend, seats=6, emit=events.append, clock_ns=clock)
        gpio.start(await backend.open())
        edge_at = clock.now + 10 * MS
        offset = rng.randint(-3 * POLL_MS * MS, 3 * POLL_MS * MS)
        changes = sorted([(edge_at + offset, 19), (edge_at, LOCKOUT)])  # seat 4
        if use_poll:
            assert isinstance(backend, GpiodPollBackend)
            poll_at = clock.now + rng.randint(0, POLL_MS * MS)
            for at, line in changes:
                while poll_at < at:  # the reads that happen before this change
                    clock.now = poll_at
                    backend.poll(gpio)
                    poll_at += POLL_MS * MS + rng.randint(0, 200 * US)  # a loop's jitter
                chip.set_logical(line, True)
            clock.now = poll_at
            backend.poll(gpio)
        else:
            for at, line in changes:
                chip.set_logical(line, True, at_ns=at)
            assert isinstance(backend, GpiodBackend)
            backend._readable(gpio)  # the loop saw the fd readable
        clock.now = edge_at + 500 * MS
        gpio.settle()
        gpio.close()
        state = base
        for event in events:
            if isinstance(event, ChipSensed | LockoutPressed):
                state, _ = step(RULES, state, event)
        counted = 4 in state.wagers
        if counted and offset >= 0:
            late_accepted += 1
        if not counted and offset < 0:
            refused_before.append(-offset)
    return max(refused_before, default=0) / MS, late_accepted


async def main(samples: int, trials: int, repeats: int) -> None:
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        base = statistics.median(await raw_read(samples))
        kernel = statistics.median(await decision_latency(samples, use_poll=False))
        poll = statistics.median(await decision_latency(samples // 4, use_poll=True))
        for key, value in (
            ("raw os.read (us)", base),
            ("gpiod edge -> decision (us)", kernel),
            ("gpiod-poll edge -> decision (us)", poll),
            ("gpiod / raw read (x)", kernel / base),
            ("gpiod-poll / raw read (x)", poll / base),
        ):
            runs.setdefault(key, []).append(value)
    windows: dict[str, list[float]] = {}
    late = 0
    for seed in range(repeats):
        for name, use_poll in (("gpiod", False), ("gpiod-poll", True)):
            window, accepted = await refusal_window(trials, seed, use_poll)
            late += accepted
            windows.setdefault(f"{name} refusal window (ms)", []).append(window)
            windows.setdefault(f"{name} window / raw read (x)", []).append(
                window * 1000 / runs["raw os.read (us)"][seed]
            )
    print(
        f"{repeats} runs; latency: median of {samples} edges per run; refusal window: "
        f"{trials} chips within +-{3 * POLL_MS} ms of the edge per run; poll period {POLL_MS} ms"
    )
    for key, values in {**runs, **windows}.items():
        print(f"  {key:<36} {spread(values, '9.3f')}")
    print(f"  late wagers accepted (must be 0)     {late}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logs.configure("ERROR")
    asyncio.run(main(args.samples, args.trials, args.repeats))
