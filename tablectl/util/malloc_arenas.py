"""glibc's malloc arenas, limited for a process that runs for months (issue 29, flat memory).

glibc gives a thread that allocates an arena of its own, up to eight per core. An arena keeps
what was freed in it for reuse and returns little to the system, so each thread that has ever
allocated holds its own fragments: the daemon's journal thread, the shuffle monitor's, the
to_thread workers. With SQLite's caches bounded and the Python heap flat, that was what still
grew in the 20,000-round soaks (docs/mqtt.md, "Issue 29: flat memory"). Two arenas (the main
one and one for every other thread) is what `MALLOC_ARENA_MAX=2` sets; its cost is contention
between threads that malloc at once, which the GIL already serialises for Python's own
allocations.
"""

from __future__ import annotations

import ctypes

M_ARENA_MAX = -8  # glibc's <malloc.h>
ARENAS = 2


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Arenas made from now on are at most `arenas` in all (those made already stay): call it
    before the process starts its threads. False where the C library has no mallopt (musl,
    which has no per-thread arenas to limit)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
