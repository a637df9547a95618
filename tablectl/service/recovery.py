"""Power-up recovery in the shell: what each device said first after this start, to the core.

The core settles a command the journal says was issued and never confirmed (a deal in
flight at the power-up) from the device's own word (core/recovery.py). This gathers that word
from each driver -- its boot id, its state, the events it held past the journal's cursor,
at its first STATUS that lists no event (all it held is journaled by then) -- as one
`DeviceResumed` input, and says which devices are still awaited (`status` shows a deal
waiting on one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tablectl.drivers.api import DeviceDriver, FirstWord

from tablectl.core.events import DeviceResumed, Event


def device_resumed(word: FirstWord) -> DeviceResumed:
    return DeviceResumed(
        device=word.device,
        boot_id=word.boot_id,
        cursor_boot_id=word.cursor_boot_id,
        state=word.state,
        acting=word.acting,
        events_held=word.events_held,
    )


class PowerUpRecovery:
    """Hands each device's first word after this start to the core, through `post`."""

    def __init__(self, post: Callable[[Event], None]) -> None:
        self._post = post
        self._devices: dict[str, DeviceDriver] = {}

    def watch(self, devices: Mapping[str, DeviceDriver]) -> None:
        for name, driver in devices.items():
            self._devices[name] = driver
            driver.on_first_word(self._heard)

    def _heard(self, word: FirstWord) -> None:
        self._post(device_resumed(word))

    def awaited(self) -> frozenset[str]:
        """The devices that have not said their first word since this start."""
        return frozenset(name for name, d in self._devices.items() if d.first_word_due)
