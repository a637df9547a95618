"""Debouncing for seat sensors and the lock-out button. Pure: time is passed in (ms).

Seat sensors use a trailing debounce: a chip counts only once it has rested for
`hold_ms` (a chip dropped and bounced, or slid across, is not a wager). The lock-out button
uses a leading edge: the first press closes betting at once, and bounces after it are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PresenceDebouncer:
    hold_ms: int
    stable: bool = False
    _raw: bool = False
    _changed_at_ms: int = 0

    def edge(self, level: bool, now_ms: int) -> None:
        if level != self._raw:
            self._raw = level
            self._changed_at_ms = now_ms

    def due_ms(self) -> int | None:
        """When to call settle() next, or None when nothing is pending."""
        return None if self._raw == self.stable else self._changed_at_ms + self.hold_ms

    def settle(self, now_ms: int) -> bool | None:
        """The new stable level once the raw level has held for hold_ms, else None."""
        if self._raw != self.stable and now_ms - self._changed_at_ms >= self.hold_ms:
            self.stable = self._raw
            return self.stable
        return None


@dataclass
class PressDebouncer:
    lockout_ms: int
    _last_press_ms: int | None = None

    def press(self, now_ms: int) -> bool:
        """True for a real press; False for a bounce within lockout_ms of the last one."""
        if self._last_press_ms is not None and now_ms - self._last_press_ms < self.lockout_ms:
            return False
        self._last_press_ms = now_ms
        return True
