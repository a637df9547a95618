"""Which time zone a report's local times are in: named, never guessed silently.

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
