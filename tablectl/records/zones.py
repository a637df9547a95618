"""Time as reports show it: the zone local times are in, named, never guessed silently;
durations as a person reads them.

The journal's timestamps are UTC. Reports and game pace show local times in the zone the
config names (`records.time_zone`), else in this machine's zone, resolved to its IANA name
(TZ, /etc/localtime) so that the name printed on the report is one a reader can look up.
"""

from __future__ import annotations

import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

LOCALTIME = Path("/etc/localtime")


def machine_zone(localtime: Path = LOCALTIME) -> ZoneInfo:
    """This machine's zone by its IANA name: $TZ, else where /etc/localtime points; UTC when
    neither names one (a zone without a name would print as an unverifiable offset)."""
    for name in (os.environ.get("TZ", "").removeprefix(":"), _linked_name(localtime)):
        if name:
            try:
                return ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return ZoneInfo("UTC")


def _linked_name(localtime: Path) -> str:
    try:
        target = os.readlink(localtime)
    except OSError:
        return ""
    _, found, name = target.partition("zoneinfo/")
    return name if found else ""


def report_zone(name: str | None) -> ZoneInfo:
    """The zone a report uses: the configured name, or this machine's."""
    return ZoneInfo(name) if name else machine_zone()


def duration_text(ms: float) -> str:
    """A duration for people: 0s, 2 us, 250 ms, 42s, 3m05s, 1h02m, 2d03h."""
    if ms <= 0:
        return "0s"
    if ms < 1:
        return f"{round(ms * 1000)} us"
    if ms < 1000:
        return f"{round(ms)} ms"
    seconds = round(ms / 1000)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
