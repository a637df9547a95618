"""`tablectl run` as a test can load it: the daemon with chips chattering on every seat.

Used by test_stop.py: python tests/stop_harness.py CONFIG MODE DEADLINE_S. MODE "normal", or
"swallow-once" (the shuffler task loses one cancellation, as a Python 3.11 TaskGroup does when
a child fails at the moment its parent is cancelled), or "stubborn" (it never ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from pathlib import Path

from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.service.daemon import Daemon
from tablectl.util import logs

_original_run = ReferenceShuffler.run


async def _swallow_once(self: ReferenceShuffler) -> None:
    try:
        await _original_run(self)
    except asyncio.CancelledError:
        while True:  # noqa: ASYNC110 - carries on, as the driver's reconnect loop would
            await asyncio.sleep(0.05)


async def _stubborn(self: ReferenceShuffler) -> None:
    while True:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)


def chatter(daemon: Daemon, inputs: SimulatedTableInputs, loop: asyncio.AbstractEventLoop) -> None:
    """Chips placed and lifted on every seat as fast as a thread can, each edge handed to the
    loop with call_soon_threadsafe as a GPIO library's thread does: asyncio's self-pipe,
    which that call writes every time, stays full."""
    while not daemon.ready.is_set():
        time.sleep(0.01)
    n = 0
    while True:
        seat = n % inputs.seats + 1
        change = inputs.place_chip if n // inputs.seats % 2 == 0 else inputs.remove_chip
        try:
            loop.call_soon_threadsafe(change, seat)
        except RuntimeError:  # the loop is closed: the daemon has stopped
            return
        n += 1


def wake_ups(daemon: Daemon, loop: asyncio.AbstractEventLoop) -> None:
    """Only the wake-ups of such a thread, as fast as it can: without an edge's work to slow
    it down it keeps the self-pipe full every time (the chips alone do so now and then)."""
    while not daemon.ready.is_set():
        time.sleep(0.01)
    while True:
        try:
            loop.call_soon_threadsafe(_nothing)
        except RuntimeError:
            return


def _nothing() -> None:
    pass


async def _serve(daemon: Daemon, inputs: SimulatedTableInputs) -> None:
    loop = asyncio.get_running_loop()
    threading.Thread(target=chatter, args=(daemon, inputs, loop), daemon=True).start()
    threading.Thread(target=wake_ups, args=(daemon, loop), daemon=True).start()
    await daemon.serve()


def main() -> int:
    config_path, mode, deadline_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    logs.configure("INFO", json=True)
    if mode == "swallow-once":
        ReferenceShuffler.run = _swallow_once  # type: ignore[method-assign, assignment]
    elif mode == "stubborn":
        ReferenceShuffler.run = _stubborn  # type: ignore[method-assign, assignment]
    config = load_config(Path(config_path))
    inputs = SimulatedTableInputs(config.table.seats)
    daemon = Daemon(config, gpio_backend=inputs.backend(), stop_deadline_s=deadline_s)
    asyncio.run(_serve(daemon, inputs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
