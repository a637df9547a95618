"""The daemon's malloc arenas are limited (issue 29, flat memory): glibc gives each thread
that allocates an arena of its own, each keeping its freed fragments; `tablectl run` limits
them to two before its threads start (util/malloc_arenas.py). Counted by glibc itself
(malloc_info), in a process of its own so the test process's arenas do not count."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap

import pytest

THREADS = 6
COUNT_ARENAS = textwrap.dedent(
    f"""
    import ctypes, sys, tempfile, threading
    from tablectl.util.malloc_arenas import limit_malloc_arenas
    if sys.argv[1] == "limited":
        assert limit_malloc_arenas()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.fopen.restype = ctypes.c_void_p
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    alive = threading.Barrier({THREADS + 1})
    def allocate():
        libc.malloc(4096)  # this thread's first malloc: glibc gives it an arena
        alive.wait()  # every thread alive at once: no arena is handed on by one that ended
        alive.wait()
    threads = [threading.Thread(target=allocate) for _ in range({THREADS})]
    for t in threads:
        t.start()
    alive.wait()
    with tempfile.NamedTemporaryFile() as out:
        fp = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        print(open(out.name).read().count("<heap nr="))
    alive.wait()
    for t in threads:
        t.join()
    """
)


def arenas(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "malloc_info"), reason="not glibc: no per-thread arenas"
)
def test_threads_share_two_arenas_once_limited() -> None:
    assert arenas("default") > 2  # glibc's default: an arena per thread that allocates
    assert arenas("limited") <= 2
