"""What the table needs of a card shuffler, whatever its vendor's protocol."""

from __future__ import annotations

from typing import Any, Protocol

from tablectl.drivers.reference.link import DeviceReport


class Shuffler(Protocol):
    """Reports (shuffle started/completed with its count, faults, reboots, identity) reach the
    daemon as DeviceReports; each is acknowledged once journaled."""

    @property
    def link_up(self) -> bool: ...

    async def run(self) -> None: ...

    async def wait_link_up(self) -> None: ...

    async def shuffle(self) -> None:
        """Ask for a shuffle (safe to retry). Raises LinkError when it cannot be asked."""
        ...

    def acknowledge(self, report: DeviceReport) -> None: ...

    def health(self) -> dict[str, Any]: ...
