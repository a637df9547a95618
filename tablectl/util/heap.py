"""Give the heap's free pages back to the system, now and then (issue 29: flat memory).

glibc's malloc keeps what the daemon frees (SQLite's pages and statements, the JSON of each
row, the threads' buffers) for reuse, in one arena per thread. Over months of play the free
chunks between live ones add up to resident memory nobody uses: a 20,000-round soak grew
+2.1 to +2.6 MB this way with SQLite, the mapped files and the Python heap flat
(docs/mqtt.md, "flat memory"). `malloc_trim(0)` hands every arena's free whole pages back
(madvise), wherever they lie, without moving anything; off glibc there is nothing to call.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)
GIVE_BACK_EVERY_S = 60.0


def trimmer() -> Callable[[], bool] | None:
    """glibc's malloc_trim(0) (True: some memory went back), or None where there is none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own libc
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: bool(trim(0))


async def give_back_periodically(
    quiet: Callable[[float], Awaitable[None]], every_s: float = GIVE_BACK_EVERY_S
) -> None:
    """For the daemon's life: every `every_s`, at the next quiet moment (`quiet` returns at
    one, or raises TimeoutError when none came within the time it is given), trim the heap
    in a worker thread. A trim holds each arena's lock while it walks it (0.1 to 2.7 ms in
    the daemon on a busy 2-core machine): a chip or a lock-out must not wait behind it."""
    trim = trimmer()
    if trim is None:
        log.info("heap trimming unavailable (not glibc)")
        return
    while True:
        await asyncio.sleep(every_s)
        try:
            await quiet(every_s)
        except TimeoutError:
            continue  # no quiet moment this time: the next
        await asyncio.to_thread(trim)
