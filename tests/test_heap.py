"""The daemon hands the heap's free pages back to the system (issue 29: flat memory): what
malloc keeps after a free, between chunks still in use, is resident until trimmed."""

from __future__ import annotations

import os

import pytest

from tablectl.util import heap

BLOCK = 64 * 1024  # under glibc's mmap threshold: from the heap, as the daemon's buffers are


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_trimming_gives_back_the_free_pages_between_live_chunks() -> None:
    trim = heap.trimmer()
    if trim is None:
        pytest.skip("not glibc: malloc_trim does not exist")
    blocks = [bytearray(BLOCK) for _ in range(800)]  # 50 MB, every page touched
    kept = blocks[::16]  # one block in 16 stays: free alone leaves the holes resident
    del blocks
    before = resident_bytes()
    assert trim()
    given_back = before - resident_bytes()
    assert given_back > 20 * 2**20, f"only {given_back / 2**20:.1f} MB given back"
    assert len(kept) == 50
