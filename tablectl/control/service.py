"""What the control server asks of the table: the interface the service implements.

The server sits below the service layer (docs/design.md, "Layers"): it imports no service
module and is handed something with these methods (`tablectl.service.control_port` wraps the
daemon in one). A test can hand it anything else that has them.
"""

from __future__ import annotations

from typing import Any, Protocol

from tablectl.control.protocol import (
    ShufflerCount,
    ShufflerSelfTest,
    ShufflerTestRequest,
    TestRequest,
)
from tablectl.core.events import Event
from tablectl.status import Devices, Status


class Watch(Protocol):
    """One watcher's feed: journal rows and link changes; None when it fell too far behind."""

    async def get(self) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class TableService(Protocol):
    def status(self) -> Status:
        """The daemon's status, as `tablectl status --json` shows it."""
        ...

    def devices(self) -> Devices:
        """Each device with its link and faults, and the broker (the server adds itself)."""
        ...

    def links(self) -> dict[str, str]:
        """name -> up/down for every device, and the broker as connected/disconnected."""
        ...

    def last_seq(self) -> int:
        """The last journal row's seq."""
        ...

    def subscribe(self) -> Watch: ...

    def wall_clock_ms(self) -> int:
        """The table's wall clock (ms since the epoch): the time a deck input carries."""
        ...

    async def submit(self, event: Event) -> list[dict[str, Any]]:
        """Journal a person's command; the rows it wrote. Raises Rejected."""
        ...

    async def reset_link(self, device: str, by: str) -> list[dict[str, Any]]: ...

    async def shuffler_test(
        self, request: ShufflerTestRequest
    ) -> ShufflerCount | ShufflerSelfTest: ...

    async def technician_test(self, request: TestRequest, by: str) -> dict[str, Any]:
        """One step of a technician's walk test."""
        ...
