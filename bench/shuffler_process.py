"""A simulated shuffler in a process of its own, on a new pseudo-terminal: for benches that
measure a table daemon's CPU without the device's side of the link. It prints the pty's path
and serves until SIGTERM; not for people."""

from __future__ import annotations

import argparse
import asyncio
import random
import signal

from tablectl.simulators.shuffler import ShufflerSimulator


async def main(shuffle_ms: int, seed: str) -> None:
    sim = ShufflerSimulator(shuffle_ms=shuffle_ms, rng=random.Random(seed))
    print(sim.open_pty(), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    sim.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--shuffle-ms", type=int, default=20)
    p.add_argument("--seed", default="bench")
    a = p.parse_args()
    asyncio.run(main(a.shuffle_ms, a.seed))
