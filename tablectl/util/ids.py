"""Event ids: UUIDv7 (RFC 9562), time-ordered so ids sort the way events happened.

Python 3.11 has no uuid7; this is the RFC's layout: 48-bit Unix ms, version, 74 random bits.
"""

from __future__ import annotations

import os
import time
import uuid

# The low 80 bits of a UUIDv7 (after its 48-bit ms): the random bits it keeps (rand_a, 12;
# rand_b, 62) and the version (7) and RFC 4122 variant (0b10) set over the others.
_RANDOM_BITS = (0xFFF << 64) | ((1 << 62) - 1)
_VERSION_VARIANT = (0x7 << 76) | (0b10 << 62)


def uuid7(unix_ms: int | None = None) -> uuid.UUID:
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    low = int.from_bytes(os.urandom(10), "big") & _RANDOM_BITS | _VERSION_VARIANT
    return uuid.UUID(int=(ms & ((1 << 48) - 1)) << 80 | low)


def uuid7_texts(unix_ms: int, count: int) -> list[str]:
    """count ids of one millisecond as `str(uuid7(unix_ms))` writes them (the same layout,
    74 random bits each), for a commit's rows: the ms part is formatted once and the random
    bits drawn in one read, with no UUID object per id."""
    ms = f"{unix_ms & ((1 << 48) - 1):012x}"
    prefix = f"{ms[:8]}-{ms[8:]}-"
    rand = os.urandom(10 * count)
    texts = []
    for n in range(0, 10 * count, 10):
        low = int.from_bytes(rand[n : n + 10], "big") & _RANDOM_BITS | _VERSION_VARIANT
        tail = f"{low:020x}"
        texts.append(f"{prefix}{tail[:4]}-{tail[4:8]}-{tail[8:]}")
    return texts
