"""Debouncing for seat sensors and the lock-out button. Pure: edge times are passed in (ns).

A seat sensor's contact episode starts at the first edge away from its decided level (a chip
arriving, or leaving) and ends once the raw level has held for `hold_ns`: a chip counts only
once it has rested that long (a chip dropped and bounced, or slid across, is not a wager).
Every episode ends in exactly one decision, carrying the time of its first edge, so the core
can compare when a chip *arrived* with when "no more bets" was called, however long the chip
took to settle. The lock-out button acts on its leading edge; bounces after it are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decision:
    present: bool  # the decided level: a chip rests on the sensor
    since_ns: int  # the episode's first edge: when the chip arrived (or left)
    changed: bool  # False: the episode ended where it began (a chip that bounced off)


@dataclass
class SeatDebouncer:
    hold_ns: int
    stable: bool = False  # the decided level
    _raw: bool = False
    _episode_since_ns: int | None = None
    _last_edge_ns: int = 0
    _stable_since_ns: int = 0

    def edge(self, level: bool, at_ns: int) -> None:
        if level == self._raw:
            return  # a repeated level (a missed edge in between): nothing new
        self._raw = level
        self._last_edge_ns = at_ns
        if self._episode_since_ns is None:
            self._episode_since_ns = at_ns

    def due_ns(self) -> int | None:
        """When to call settle() next, or None when no episode is open."""
        if self._episode_since_ns is None:
            return None
        return self._last_edge_ns + self.hold_ns

    def settle(self, now_ns: int) -> Decision | None:
        """The episode's decision once the raw level has held for hold_ns, else None."""
        since = self._episode_since_ns
        if since is None or now_ns - self._last_edge_ns < self.hold_ns:
            return None
        changed = self._raw != self.stable
        self.stable = self._raw
        self._episode_since_ns = None
        if changed:
            self._stable_since_ns = since
        return Decision(self.stable, since, changed)

    def arriving_since(self) -> int | None:
        """When the chip still settling on an empty sensor arrived, or None."""
        return None if self.stable else self._episode_since_ns

    def resting_since(self) -> int | None:
        """When the chip resting on the sensor arrived (its decided episode), or None."""
        if not self.stable or self._episode_since_ns is not None:
            return None
        return self._stable_since_ns


@dataclass
class PressDebouncer:
    lockout_ns: int
    _last_press_ns: int | None = None

    def press(self, at_ns: int) -> bool:
        """True for a real press; False for a bounce within lockout_ns of the last one."""
        if self._last_press_ns is not None and at_ns - self._last_press_ns < self.lockout_ns:
            return False
        self._last_press_ns = at_ns
        return True
