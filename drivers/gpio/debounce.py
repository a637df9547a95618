"""Debouncing for seat sensors and the lock-out button. Pure: edge times are passed in (ns).

A seat's sensor is followed two ways (docs/gpio.md, the lock-out rule):

- its decided level, what the core is told: a contact episode starts at the first edge away
  from the decided level (a chip arriving, or leaving) and ends once the raw level has held
  for `hold_ns`, in exactly one decision carrying the time of its first edge;
- its contact, what the lock-out edge is judged on: the sensor's closings joined across
  openings that surely lasted at most `bounce_ns` (contact bounce). A contact has rested
  once it stayed closed, without an edge, for `hold_ns`. At the lock-out edge a seat counts
  if its contact was surely closed at the edge and has rested, or is watched from the edge
  until it rests (it counts) or opens for longer than a bounce (it does not).

Every stamp is the latest moment its edge can have happened; with its resolution r the edge
happened within (t - r, t].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tablectl.core.events import placed_before_lockout


class Decision(NamedTuple):
    present: bool  # the decided level: a chip rests on the sensor
    since_ns: int  # the episode's first edge (a verdict from the edge: its contact's first)
    changed: bool = True  # False: the episode ended where it began (a chip that bounced off)


@dataclass
class SeatDebouncer:
    hold_ns: int
    bounce_ns: int = 0
    stable: bool = False  # the decided level
    level: bool = False  # raw, as the last edge left it
    _episode_since_ns: int | None = None
    _last_edge_ns: int = 0
    _stable_since_ns: int = 0
    # The contact: its first closing (None: none yet), whether it has rested, and while the
    # sensor is open the earliest moment the opening can have happened.
    _contact_since_ns: int | None = None
    _rested: bool = False
    _open_from_ns: int | None = None
    # A lock-out edge this seat's contact is being judged from (None: not watched), and by
    # when it must have rested: a chip settles in far less than twice its rest time.
    _watch_ns: int | None = None
    _watch_until_ns: int = 0

    def edge(self, level: bool, at_ns: int, resolution_ns: int = 1) -> Decision | None:
        """A raw edge; a verdict when it decides a watched contact (it opened too soon)."""
        if level == self.level:
            return None  # a repeated level (a missed edge in between): nothing new
        self._note_rest(at_ns)
        self.level = level
        self._last_edge_ns = at_ns
        if self._episode_since_ns is None:
            self._episode_since_ns = at_ns
        if level:
            opened = self._open_from_ns
            if self._contact_since_ns is None or opened is None or at_ns - opened > self.bounce_ns:
                self._contact_since_ns, self._rested = at_ns, False  # a new contact
            self._open_from_ns = None
            return None
        self._open_from_ns = at_ns - max(1, resolution_ns)
        watch = self._watch_ns
        if watch is not None and self._open_from_ns < watch:
            # It may have opened at or before the edge: not surely on the sensor then.
            return self._verdict(False, at_ns)
        return None

    @property
    def last_edge_ns(self) -> int:
        """The stamp of the last edge that changed the raw level."""
        return self._last_edge_ns

    def _note_rest(self, now_ns: int) -> None:
        if self.level and now_ns - self._last_edge_ns >= self.hold_ns:
            self._rested = True

    def _verdict(self, present: bool, since_ns: int) -> Decision:
        self._watch_ns = None
        return Decision(present, since_ns)

    def due_ns(self) -> int | None:
        """When to call settle() next, or None when nothing is open: before then, settle()
        decides nothing and changes nothing."""
        due = None if self._episode_since_ns is None else self._last_edge_ns + self.hold_ns
        if self._watch_ns is not None:
            watch_due = self._watch_until_ns + 1
            if self._open_from_ns is not None:
                watch_due = min(watch_due, self._open_from_ns + self.bounce_ns + 1)
            due = watch_due if due is None else min(due, watch_due)
        return due

    def settle(self, now_ns: int) -> list[Decision]:
        """What is decided by now: a watched contact's verdict (it opened for longer than a
        bounce, or it rested), and the episode's decision once the raw level held hold_ns."""
        out: list[Decision] = []
        self._note_rest(now_ns)
        opened = self._open_from_ns
        if self._watch_ns is not None and opened is not None and now_ns - opened > self.bounce_ns:
            out.append(self._verdict(False, self._last_edge_ns))  # it left: not one chip
        elif (
            self._watch_ns is not None
            and now_ns > self._watch_until_ns
            and not (self.level and self._last_edge_ns + self.hold_ns <= self._watch_until_ns)
        ):
            out.append(self._verdict(False, self._last_edge_ns))  # chattering, never resting
        decided = self._settle_episode(now_ns)
        if decided is not None:
            if self._watch_ns is not None and decided.present:
                assert self._contact_since_ns is not None
                decided = self._verdict(True, self._contact_since_ns)  # it rested
            out.append(decided)
        return out

    def _settle_episode(self, now_ns: int) -> Decision | None:
        since = self._episode_since_ns
        if since is None or now_ns - self._last_edge_ns < self.hold_ns:
            return None
        changed = self.level != self.stable
        self.stable = self.level
        self._episode_since_ns = None
        if changed:
            self._stable_since_ns = since
        return Decision(self.stable, since, changed)

    # --- at the lock-out edge ---------------------------------------------------------

    def closed_at(self, at_ns: int, resolution_ns: int) -> bool:
        """The sensor surely closed at an edge that happened within (at - resolution, at]:
        its last edge is a closing stamped surely before it (the tie rule)."""
        return self.level and placed_before_lockout(self._last_edge_ns, at_ns, resolution_ns)

    def rested(self) -> bool:
        """The current contact has rested (call settle up to the edge first)."""
        return self.level and self._rested

    def watch(self, at_ns: int) -> None:
        """Judge the current contact from the lock-out edge at at_ns: one verdict follows,
        at the latest twice hold_ns after it."""
        self._watch_ns, self._watch_until_ns = at_ns, at_ns + 2 * self.hold_ns

    def unwatch(self) -> None:
        self._watch_ns = None

    @property
    def watched(self) -> bool:
        return self._watch_ns is not None


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


@dataclass
class LockoutButton:
    """The lock-out button: a press on its leading edge (bounces within debounce_ns of it
    ignored); released once it has stayed up for debounce_ns; held past hold_max_ns, stuck."""

    debounce_ns: int
    hold_max_ns: int
    level: bool = False  # raw
    held: bool = False  # a press taken, its release not yet
    _press: PressDebouncer | None = None
    _pressed_at_ns: int = 0
    _up_since_ns: int | None = None
    _stuck_told: bool = False

    def __post_init__(self) -> None:
        self._press = PressDebouncer(self.debounce_ns)

    def edge(self, level: bool, at_ns: int) -> bool:
        """A raw edge; True when it is a press (the leading edge of "no more bets")."""
        if level == self.level:
            return False
        self.level = level
        if not level:
            self._up_since_ns = at_ns
            return False
        self._up_since_ns = None
        assert self._press is not None
        if not self._press.press(at_ns):
            return False  # a bounce of the press being held
        self.held, self._pressed_at_ns, self._stuck_told = True, at_ns, False
        return True

    def due_ns(self) -> int | None:
        if not self.held:
            return None
        if self._up_since_ns is not None:
            return self._up_since_ns + self.debounce_ns
        return None if self._stuck_told else self._pressed_at_ns + self.hold_max_ns

    def released(self, now_ns: int) -> int | None:
        """When the button went up, once it has stayed up for debounce_ns."""
        up = self._up_since_ns
        if not self.held or up is None or now_ns - up < self.debounce_ns:
            return None
        self.held = False
        return up

    def stuck(self, now_ns: int) -> int | None:
        """The press held down past hold_max_ns (told once): when it was pressed. Ask before
        released(): a late look still sees a button that was held too long, then let go."""
        if not self.held or self._stuck_told:
            return None
        down_until = now_ns if self._up_since_ns is None else self._up_since_ns
        if down_until - self._pressed_at_ns < self.hold_max_ns:
            return None
        self._stuck_told = True
        return self._pressed_at_ns
