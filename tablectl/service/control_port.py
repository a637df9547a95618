"""The daemon as the control server sees it (`tablectl.control.service.TableService`).

The control package sits below the service layer and imports none of it; this adapter is the
one place that hands the server what it asks for, so the daemon keeps no control-specific
methods and the server no knowledge of the daemon.
"""

from __future__ import annotations

from typing import Any, Protocol

from tablectl.control.protocol import (
    ShufflerCount,
    ShufflerSelfTest,
    ShufflerTestRequest,
    TestRequest,
)
from tablectl.control.service import Watch
from tablectl.core.events import Event
from tablectl.service.walk_test import TableUnderTest, TechnicianTests
from tablectl.service.watch import Hub
from tablectl.status import Devices, Headline, Status
from tablectl.store.journal import Store


class ControlledTable(TableUnderTest, Protocol):
    """What the control socket reaches of a running table (the daemon is one): named here,
    so that this adapter imports nothing of the daemon that builds it."""

    @property
    def store(self) -> Store | None: ...

    @property
    def hub(self) -> Hub: ...

    def status(self) -> Status: ...

    def headline(self) -> Headline: ...

    def wall_clock_ms(self) -> int: ...

    async def reset_link(self, device: str, by: str) -> list[dict[str, Any]]: ...

    async def shuffler_test(
        self, request: ShufflerTestRequest
    ) -> ShufflerCount | ShufflerSelfTest: ...


class DaemonControl:
    """A `TableService` over a running daemon."""

    def __init__(self, daemon: ControlledTable) -> None:
        self._daemon = daemon
        self._tests = TechnicianTests(daemon)

    def status(self) -> Status:
        return self._daemon.status()

    def devices(self) -> Devices:
        status = self._daemon.status()
        return Devices(devices=status.devices(), broker=status.mqtt)

    def links(self) -> dict[str, str]:
        return self._daemon.headline().links

    def last_seq(self) -> int:
        assert self._daemon.store is not None
        return self._daemon.store.last_seq

    def subscribe(self) -> Watch:
        return self._daemon.hub.subscribe()

    def wall_clock_ms(self) -> int:
        return self._daemon.wall_clock_ms()

    async def submit(self, event: Event) -> list[dict[str, Any]]:
        return await self._daemon.submit(event)

    async def reset_link(self, device: str, by: str) -> list[dict[str, Any]]:
        return await self._daemon.reset_link(device, by)

    async def shuffler_test(self, request: ShufflerTestRequest) -> ShufflerCount | ShufflerSelfTest:
        return await self._daemon.shuffler_test(request)

    async def technician_test(self, request: TestRequest, by: str) -> dict[str, Any]:
        return await self._tests.step(request, by)
