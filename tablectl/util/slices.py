"""Long runs of work on the event loop, cut into slices.

The loop takes GPIO edges, serial bytes and MQTT traffic between callbacks; a callback that
hands a hundred rows to the broker, or runs a batch's after-commit work, holds all of them
back meanwhile. A lock-out edge must not wait behind such a run (649a.2(c)(2): no wager after
"no more bets"), so each run yields to the loop once it has worked about a slice.
"""

from __future__ import annotations

import asyncio
import time

# Short against the lock-out's 1 ms budget, long against one loop iteration (~20 us).
SLICE_S = 0.0002


class Slices:
    """`await slices.check()` inside a loop of work: yields once a slice has run."""

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self._slice_s = slice_s
        self._end = time.perf_counter() + slice_s

    async def check(self) -> None:
        if time.perf_counter() >= self._end:
            await asyncio.sleep(0)
            self._end = time.perf_counter() + self._slice_s
