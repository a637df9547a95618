"""CPU of the GPIO edge path and of a shuffler poll, each against a bare baseline in one run.

Both are measured cold, as the daemon meets them: every operation follows a pause of 2-10 ms
(the baseline's too), so caches and branch predictors have moved on in between.

- GPIO edge: the simulated table's chips and button (SimulatedTableInputs) through the mock
  backend, TableGpio and SeatInputs to the post (the daemon's `post`; here a list, so the
  dispatcher and the core are not counted). A scripted round: two chips on, until they
  rested; the lock-out pressed and released; the two chips off, until all is settled. Timed
  with time.thread_time_ns: each edge's call (backend -> post, all on the loop), each settle
  timer, and the lock-out's edge -> post latency (perf_counter_ns). Baselines, interleaved
  with the edges in the same pauses: a bare `loop.call_soon_threadsafe` (the hand-off every
  gpiozero edge pays before any of our code), and a bare call chain of the same depth (an
  Edge built, handed down four calls, appended).
- Shuffler poll: the reference driver (ReferenceShuffler: Link, PolledDevice, the serial
  transport) against ShufflerSimulator on a real pseudo-terminal, in this process as in the
  daemon, polling every 10 ms (the fastest cadence the link keeps: FAST_POLL_S); the loop
  thread's CPU over the polls, per poll. Baseline: the same bytes (a POLL frame, the STATUS
  it gets) over a bare pty, both ends os.read/os.write on the same loop, one round trip every
  10 ms, the loop thread's CPU per round trip.

Ratios against the baselines of the same run; min / median / max over --runs.

Run: .venv/bin/python bench/gpio_link_cpu.py [--runs 5] [--rounds 40] [--polls 300]
(--rounds 0 or --polls 0 leaves that part out)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import statistics
import time
import tty
from collections.abc import Callable

from figures import spread
from tablectl.drivers.api import DeviceReport
from tablectl.drivers.gpio.settings import GpioSettings
from tablectl.drivers.gpio.table_io import TableGpio
from tablectl.drivers.reference.framing import Frame
from tablectl.drivers.reference.link import LinkSettings
from tablectl.drivers.reference.messages import MsgType, Status, encode_poll, encode_status
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.drivers.transport.serial import SerialConnector
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.core.events import ChipSensed, Event, LockoutPressed
from tablectl.util import logs

SEATS = 7
GPIO = GpioSettings(
    backend="mock",
    seat_sensor_pins=tuple(range(SEATS)),
    seat_light_pins=tuple(range(SEATS)),
    lockout_pin=99,
    chip_present_ms=20,
    chip_bounce_ms=5,
    lockout_debounce_ms=10,
)
POLL_MS = 10


async def pause(rng: random.Random) -> None:
    await asyncio.sleep(rng.uniform(0.002, 0.010))


# --- the GPIO edge ----------------------------------------------------------------------


def _chain(sink: list[object]) -> Callable[[int, bool, int], None]:
    """The baseline chain: an edge (a plain tuple: none of our types) built and handed down
    four calls to a list."""

    def post(item: object) -> None:
        sink.append(item)

    def take(edges: tuple[tuple[int, bool, int, int, int], ...]) -> None:
        for edge in edges:
            post(edge)

    def deliver(*edges: tuple[int, bool, int, int, int]) -> None:
        take(edges)

    def change(line: int, level: bool, t_ns: int) -> None:
        deliver((line, level, t_ns, 1, 1))

    return change


async def gpio_run(rounds: int, rng: random.Random) -> dict[str, list[float]]:
    loop = asyncio.get_running_loop()
    posted: list[Event] = []
    posted_at: list[int] = []

    def post(event: Event) -> None:
        if isinstance(event, LockoutPressed):
            posted_at.append(time.perf_counter_ns())
        posted.append(event)

    inputs = SimulatedTableInputs(SEATS)
    backend = inputs.backend()
    gpio = TableGpio(GPIO, backend, seats=SEATS, emit=post)
    gpio.start(await backend.open())
    task = asyncio.create_task(gpio.run())
    await asyncio.sleep(0)
    out: dict[str, list[float]] = {
        "edge": [],
        "settle": [],
        "round": [],
        "lockout": [],
        "handoff": [],
        "chain": [],
    }
    settle = gpio.settle
    round_cpu = [0]

    def timed_settle() -> None:
        t0 = time.thread_time_ns()
        settle()
        spent = time.thread_time_ns() - t0
        out["settle"].append(spent / 1000)
        round_cpu[0] += spent

    gpio.settle = timed_settle  # type: ignore[method-assign]
    chain = _chain([])

    def noop() -> None:
        pass

    async def baselines() -> None:
        await pause(rng)
        t0 = time.thread_time_ns()
        loop.call_soon_threadsafe(noop)
        out["handoff"].append((time.thread_time_ns() - t0) / 1000)
        await pause(rng)
        t0 = time.thread_time_ns()
        chain(3, True, time.monotonic_ns())
        out["chain"].append((time.thread_time_ns() - t0) / 1000)

    async def edge(act: Callable[[], None], edges: int = 1) -> int:
        """Act after a pause; when it started (perf_counter_ns)."""
        await pause(rng)
        at = time.perf_counter_ns()
        t0 = time.thread_time_ns()
        act()
        spent = time.thread_time_ns() - t0
        out["edge"].extend([spent / edges / 1000] * edges)
        round_cpu[0] += spent
        await baselines()
        return at

    async def until_settled() -> None:
        """Until every chip is decided and the button released: no timer is left (the
        timers' own work is what is measured: nothing is woken when they decide)."""
        for _ in range(100):
            due = gpio.inputs.due_ns()
            if due is None:
                return
            await asyncio.sleep(max(0, due - time.monotonic_ns()) / 1e9 + 0.002)
        raise AssertionError("the inputs never settled")

    for _ in range(rounds):
        round_cpu[0] = 0
        for seat in (1, 2):
            await edge(functools.partial(inputs.place_chip, seat))
        await until_settled()
        pressed = await edge(inputs.press_lockout, edges=2)
        out["lockout"].append((posted_at[-1] - pressed) / 1000)
        for seat in (1, 2):
            await edge(functools.partial(inputs.remove_chip, seat))
        await until_settled()
        out["round"].append(round_cpu[0] / 1000)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    gpio.close()
    chips = [e for e in posted if isinstance(e, ChipSensed)]
    assert len(chips) == 4 * rounds, f"{len(chips)} chips decided in {rounds} rounds"
    return out


# --- the shuffler poll ------------------------------------------------------------------


async def poll_run(polls: int) -> float:
    """The loop thread's CPU per poll (µs): the reference driver against the simulator."""
    sim = ShufflerSimulator(rng=random.Random(1))
    path = sim.open_pty()
    reports: list[DeviceReport] = []
    driver = ReferenceShuffler(
        SerialConnector(path, 115200),
        reports.append,
        LinkSettings(poll_interval_ms=POLL_MS),
    )
    task = asyncio.create_task(driver.run())
    await driver.wait_link_up()
    await asyncio.sleep(0.1)  # past the first polls
    n0, t0 = driver.counters.requests, time.thread_time_ns()
    await asyncio.sleep(polls * POLL_MS / 1000)
    n1, t1 = driver.counters.requests, time.thread_time_ns()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    sim.close()
    return (t1 - t0) / (n1 - n0) / 1000


async def pty_run(polls: int) -> float:
    """The baseline (µs): the same bytes over a bare pty, both ends on this loop."""
    loop = asyncio.get_running_loop()
    request = Frame(1, 7, MsgType.POLL, encode_poll(12345, 0)).encode()
    reply = Frame(1, 7, MsgType.STATUS, encode_status(Status(2, 0, 52, 52, 12345))).encode()
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    os.set_blocking(slave, False)
    waiting: list[asyncio.Future[None]] = []

    def device() -> None:
        os.read(master, 4096)
        os.write(master, reply)

    def host() -> None:
        os.read(slave, 4096)
        if waiting and not waiting[-1].done():
            waiting[-1].set_result(None)

    loop.add_reader(master, device)
    loop.add_reader(slave, host)
    try:
        start = loop.time()
        t0 = time.thread_time_ns()
        for i in range(polls):
            # The same cadence as the driver's: each round trip starts 10 ms after the last.
            await asyncio.sleep(max(0.0, start + i * POLL_MS / 1000 - loop.time()))
            waiting.append(loop.create_future())
            os.write(slave, request)
            await waiting[-1]
        t1 = time.thread_time_ns()
    finally:
        loop.remove_reader(master)
        loop.remove_reader(slave)
        os.close(master)
        os.close(slave)
    return (t1 - t0) / polls / 1000


# --- the report -------------------------------------------------------------------------


async def main(runs: int, rounds: int, polls: int) -> None:
    figures: dict[str, list[float]] = {}

    def keep(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    for run in range(runs):
        rng = random.Random(run)
        if rounds:
            await gpio_figures(rounds, rng, keep)
        if polls:
            await poll_figures(polls, keep)
    print(
        f"runs: {runs}; gpio: {rounds} rounds of 6 edges per run (medians); "
        f"poll: {polls} polls every {POLL_MS} ms per run"
    )
    for name, values in figures.items():
        print(f"  {name:<44} {spread(values)}")


async def gpio_figures(rounds: int, rng: random.Random, keep: Callable[[str, float], None]) -> None:
    g = await gpio_run(rounds, rng)
    handoff = statistics.median(g["handoff"])
    chain = statistics.median(g["chain"])
    edge = statistics.median(g["edge"])
    settle = statistics.median(g["settle"])
    per_round = statistics.median(g["round"])
    keep("gpio: bare call_soon_threadsafe (us)", handoff)
    keep("gpio: bare call chain (us)", chain)
    keep("gpio: edge -> post (us)", edge)
    keep("gpio: settle timer (us)", settle)
    keep("gpio: edges + timers per round (us)", per_round)
    keep("gpio: lock-out edge -> post latency (us)", statistics.median(g["lockout"]))
    keep("gpio: edge / call_soon_threadsafe (x)", edge / handoff)
    keep("gpio: edge / call chain (x)", edge / chain)
    keep("gpio: settle / call chain (x)", settle / chain)


async def poll_figures(polls: int, keep: Callable[[str, float], None]) -> None:
    bare = await pty_run(polls)
    ours = await poll_run(polls)
    keep("poll: bare pty round trip (us)", bare)
    keep("poll: driver + simulator per poll (us)", ours)
    keep("poll: driver + simulator / bare pty (x)", ours / bare)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--polls", type=int, default=300)
    args = parser.parse_args()
    logs.configure("ERROR")
    asyncio.run(main(args.runs, args.rounds, args.polls))
