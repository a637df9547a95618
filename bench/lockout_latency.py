"""Lock-out latency: GPIO edge -> acceptance closed, through the real daemon.

The edge is driven from a worker thread (as gpiozero's callbacks arrive) and timed twice:
- queued: the lock-out event is in the table's single FIFO queue. From here on no chip can
  be recognised, since every later chip event is behind it in the same queue;
- closed: the core's state says no more wagers are accepted. This also waits for whatever
  step was being committed (SQLite synchronous=FULL, about a millisecond) when the edge came.
The baseline, in the same run, is the bare thread -> event-loop hand-off
(call_soon_threadsafe), so the figures compare across machines as ratios.

Run: .venv/bin/python bench/lockout_latency.py [--samples N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import tempfile
import time
from pathlib import Path

from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.core.effects import Effect
from tablectl.core.events import Event, LockoutPressed, Settle
from tablectl.core.round import Phase, TableState
from tablectl.service.daemon import Daemon
from tablectl.util import logs

REPO = Path(__file__).resolve().parents[1]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def baseline(samples: int) -> list[float]:
    loop = asyncio.get_running_loop()
    out: list[float] = []
    for _ in range(samples):
        done: asyncio.Future[int] = loop.create_future()

        def from_thread(fut: asyncio.Future[int] = done) -> int:
            t0 = time.perf_counter_ns()
            loop.call_soon_threadsafe(lambda: fut.set_result(time.perf_counter_ns()))
            return t0

        t0 = await asyncio.to_thread(from_thread)
        out.append((await done - t0) / 1000)
    return out


async def lockout(samples: int) -> tuple[list[float], list[float]]:
    # No broker is needed for the measurement, but the relay is part of the daemon's load.
    with PrivateBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        sim = ShufflerSimulator(shuffle_ms=1, rng=random.Random(0))
        cfg = simulated_config(
            load_config(REPO / "config" / "three-card-poker.toml"),
            port=sim.open_pty(),
            broker=broker,
            data_dir=Path(tmp),
        )
        inputs = SimulatedTableInputs(cfg.table.seats)
        daemon = Daemon(cfg, gpio_backend=inputs.backend())
        loop = asyncio.get_running_loop()
        closed_at: list[int] = []
        queued_at: list[int] = []
        post = daemon.post

        def timed_post(event: Event) -> None:
            if isinstance(event, LockoutPressed):
                queued_at.append(time.perf_counter_ns())
            post(event)

        daemon.post = timed_post  # type: ignore[method-assign]

        def observe(event: Event, state: TableState, effects: list[Effect]) -> None:
            if isinstance(event, LockoutPressed) and state.phase is Phase.LOCKED:
                closed_at.append(time.perf_counter_ns())

        daemon.observers.append(observe)
        task = asyncio.create_task(daemon.run())
        await daemon.ready.wait()
        closed: list[float] = []
        queued: list[float] = []
        for _ in range(samples):
            await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)

            def press() -> int:
                # From a worker thread, as a gpiozero callback arrives.
                t0 = time.perf_counter_ns()
                loop.call_soon_threadsafe(inputs.press_lockout)
                return t0

            t0 = await asyncio.to_thread(press)
            await daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 10)
            closed.append((closed_at[-1] - t0) / 1000)
            queued.append((queued_at[-1] - t0) / 1000)
            await asyncio.sleep(cfg.gpio.lockout_debounce_ms / 1000)
            await daemon.submit(Settle(hands={}))
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sim.close()
        return queued, closed


async def main(samples: int) -> None:
    base = await baseline(samples)
    queued, lock = await lockout(samples)
    print(f"samples: {samples}")
    for name, values in (
        ("thread hand-off (baseline)", base),
        ("lock-out edge -> queued", queued),
        ("lock-out edge -> closed", lock),
    ):
        p50, p99 = percentile(values, 50), percentile(values, 99)
        mean = statistics.fmean(values)
        print(f"{name:<28} p50 {p50:8.1f} us   p99 {p99:8.1f} us   mean {mean:8.1f} us")
    for name, values in (("queued", queued), ("closed", lock)):
        r50 = percentile(values, 50) / percentile(base, 50)
        r99 = percentile(values, 99) / percentile(base, 99)
        print(f"ratio {name} / baseline       p50 {r50:8.1f} x    p99 {r99:8.1f} x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    logs.configure("ERROR")
    asyncio.run(main(args.samples))
