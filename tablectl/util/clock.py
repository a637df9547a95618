"""The one clock: the running event loop's monotonic time, and a loop that runs on virtual time.

Drivers read time only through `monotonic_ms()` (the loop's clock) and wait only with asyncio
(`sleep`, `timeout`, `call_later`), so the same code runs on a `VirtualTimeLoop` in tests: time
stands still while anything is runnable and jumps to the next timer when nothing is, so a test
of retries, timeouts and backoff takes no wall-clock time and never sleeps.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def monotonic_ms() -> int:
    """Milliseconds on the running loop's monotonic clock (virtual under VirtualTimeLoop)."""
    return int(asyncio.get_running_loop().time() * 1000)


class _VirtualSelector(selectors.DefaultSelector):
    """Polls without blocking; where the loop would wait for its next timer, time jumps."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            # No timer at all: only real I/O (or another thread) can wake the loop.
            return super().select(None)
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock starts at 0 and advances only when the loop is idle.

    For in-process tests (memory transports, simulators); not for real threads, whose
    work would race virtual time.
    """

    def __init__(self) -> None:
        self._virtual = _VirtualSelector()
        super().__init__(self._virtual)

    def time(self) -> float:
        return self._virtual.now


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on virtual time."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)
