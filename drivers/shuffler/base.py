"""What the table needs of a card shuffler, whatever its vendor's protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tablectl.drivers.reference.link import DeviceReport, FirstWord

from tablectl.core.events import Event


class Shuffler(Protocol):
    """Reports (shuffle started/completed with its count, faults, reboots, identity) reach the
    daemon as DeviceReports; each is acknowledged once journaled."""

    @property
    def link_up(self) -> bool: ...

    async def run(self) -> None: ...

    async def wait_link_up(self) -> None: ...

    @property
    def boot_id(self) -> int | None:
        """The device's boot as last read (None: not read since this start, and no cursor)."""
        ...

    def on_first_word(self, callback: Callable[[FirstWord], None]) -> None:
        """Call back once after this start, at the first STATUS that lists no event (all it
        held is journaled): what it said first (service/recovery.py)."""
        ...

    @property
    def first_word_due(self) -> bool:
        """The device has not yet said its first word since this start."""
        ...

    async def shuffle(self) -> None:
        """Ask for a shuffle (safe to retry). Raises LinkError when it cannot be asked."""
        ...

    def acknowledge(self, report: DeviceReport) -> None: ...

    def fault_showing(self) -> Event | None:
        """The fault the device's last STATUS shows (None: none, or the link is down)."""
        ...

    def reset_point(self) -> tuple[int, int, int]:
        """(boot, last event journaled, last event to skip) for a reset of a link stopped at
        refused events. Raises LinkError (ResetRefused) saying why it cannot be reset."""
        ...

    def reset_to(self, boot_id: int, event_id: int) -> None:
        """The reset is journaled: take the device's events after event_id."""
        ...

    async def deck_loaded(self) -> tuple[str, str] | None:
        """The deck it holds, (id, back colour), where its protocol reports one; else None.
        Raises LinkError when it cannot be asked."""
        ...

    def health(self) -> dict[str, Any]: ...
