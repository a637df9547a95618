"""One table daemon on simulated devices playing one round a second: a process of the N-table
bench (bench/mqtt_tables.py) and of bench/round_cpu.py, not for people.

It prints `ready` once the daemon runs and plays until SIGTERM: chips on two seats, the
lock-out, the dealer settles, every --round-s. With --rounds N it plays N rounds after a first
one, prints as JSON the process's CPU time for them (every thread: the loop, the journal's;
and the loop's thread alone) and the times its threads slept and woke, and exits. With
--shuffler PTY it drives a simulated shuffler served by another process
(bench/shuffler_process.py), so that its CPU is the daemon's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import sys
import time
from pathlib import Path

from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.core.events import Settle
from tablectl.core.table import Phase
from tablectl.service.daemon import Daemon, freeze_start_up
from tablectl.service.dispatcher import GIL_SWITCH_S
from tablectl.util import logs

REPO = Path(__file__).resolve().parents[1]


def sleeps() -> int:
    """The times this process's threads have gone to sleep and been woken (Linux: each
    thread's voluntary context switches): on a VM, what much of a daemon's CPU is made of."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


async def main(
    port: int,
    table: str,
    data_dir: Path,
    round_s: float = 1.0,
    rounds: int | None = None,
    shuffler: str | None = None,
) -> None:
    sim = None
    if shuffler is None:  # served here, on this process's loop
        sim = ShufflerSimulator(shuffle_ms=20, rng=random.Random(table))
        shuffler = sim.open_pty()
    broker = PrivateBroker.__new__(PrivateBroker)  # only its address is used
    broker.host, broker.port = "127.0.0.1", port
    base = load_config(REPO / "config" / "three-card-poker.toml")
    cfg = simulated_config(base, port=shuffler, broker=broker, data_dir=data_dir)
    cfg = cfg.model_copy(
        update={
            "table": cfg.table.model_copy(update={"table_id": table}),
            "gpio": cfg.gpio.model_copy(update={"chip_present_ms": 80}),
        }
    )
    inputs = SimulatedTableInputs(cfg.table.seats)
    daemon = Daemon(cfg, gpio_backend=inputs.backend())
    task = asyncio.create_task(daemon.run())
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await daemon.ready.wait()
    freeze_start_up()  # as serve() does (this process keeps its own SIGTERM handler)
    sys.setswitchinterval(GIL_SWITCH_S)  # as serve() does too
    print("ready", flush=True)

    async def play() -> None:
        played, cpu0, loop0, sleeps0, wall0 = 0, 0.0, 0.0, 0, 0.0
        while True:
            if played == 1:  # the first round warms up (imports, the first deck)
                cpu0, loop0, sleeps0 = time.process_time(), time.thread_time(), sleeps()
                wall0 = time.monotonic()
            if rounds is not None and played == rounds + 1:
                cpu, loop_cpu = time.process_time() - cpu0, time.thread_time() - loop0
                report = {
                    "rounds": rounds,
                    "cpu_s": cpu,
                    "loop_cpu_s": loop_cpu,
                    "sleeps": sleeps() - sleeps0,
                    "wall_s": time.monotonic() - wall0,
                }
                print(json.dumps(report), flush=True)
                stop.set()
                return
            played += 1
            start = time.monotonic()
            await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 30)
            for seat in (1, 2):
                inputs.place_chip(seat)
            await asyncio.sleep(0.15)
            inputs.press_lockout()
            await daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 30)
            for seat in (1, 2):
                inputs.remove_chip(seat)
            # The chips are off their sensors before the next round opens; a chip still
            # resting then would make its sensor stuck, and every later round wagerless.
            await daemon.wait_until(lambda s: not s.occupied, 30)
            # Hands the dealer shows: seat 1 loses, seat 2 wins a pair (no jackpot to validate).
            await daemon.submit(Settle(hands={1: "2c7d9h", 2: "QhQd4s"}))  # type: ignore[dict-item]
            await asyncio.sleep(max(0.0, round_s - (time.monotonic() - start)))

    player = asyncio.create_task(play())
    await stop.wait()
    player.cancel()
    task.cancel()
    for t in (player, task):
        with contextlib.suppress(asyncio.CancelledError):
            await t
    if sim is not None:
        sim.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--round-s", type=float, default=1.0)
    p.add_argument("--rounds", type=int)
    p.add_argument("--shuffler", help="a simulated shuffler's pty, served by another process")
    a = p.parse_args()
    logs.configure("ERROR")
    asyncio.run(main(a.port, a.table, a.data_dir, a.round_s, a.rounds, a.shuffler))
