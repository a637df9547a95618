"""What the table needs of an automated dealing shoe, whatever its vendor's protocol."""

from __future__ import annotations

from typing import Any, Protocol

from tablectl.drivers.reference.link import DeviceReport


class Shoe(Protocol):
    """Deals stacks on request and reports every card it dispenses, in order, as
    DeviceReports; each is acknowledged once journaled."""

    async def run(self) -> None: ...

    async def wait_link_up(self) -> None: ...

    async def deal(self, stacks: tuple[int, ...]) -> None:
        """Deal these stacks, in order (safe to retry). Raises LinkError when refused."""
        ...

    def acknowledge(self, report: DeviceReport) -> None: ...

    def health(self) -> dict[str, Any]: ...
