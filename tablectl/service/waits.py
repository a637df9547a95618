"""How long the table has waited for each device, against what the device says: the shell's
half of core/stalls.py.

The core's state says what the table waits for (`round.waits`: a shuffle's completion, the
shoe's deal). This watch says since when -- from the moment the device took the command (its
ACK to SHUFFLE or DEAL), started again by every step the device reports -- and compares the
wait with the device's last STATUS. A wait becomes a stall, handed to the core as
`CommandStalled` (journaled there as a fault with its remedy), when either

- the device answers but nothing of the command reached the table for the configured time
  (`shuffler.stall_timeout_s`, `shoe.stall_timeout_s`), or
- the device says it is done (a shuffler READY, a shoe IDLE) while the table still waits for
  its completion, for MISMATCH_GRACE_S: its completion was lost on its way (a shuffler that
  restarted keeping its boot id drops its new events on the table's old acknowledgement; a
  completion sent under an id already taken is skipped as a replay).

A link that is down is a fault of its own (`link-down`) and stops nothing here: the device's
events come when it is back. Time is the injected monotonic clock, so a test moves it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tablectl.core.events import CommandStalled
from tablectl.core.stalls import Awaited, Wait
from tablectl.core.table import TableState, waits
from tablectl.status import WaitView

# A device that says it is done while the table waits this long for its completion has lost
# it: a few polls, and the commit of what they brought, are far shorter.
MISMATCH_GRACE_S = 3.0
# What each device says when it is done with what the table waits for.
DONE_STATES = {Awaited.SHUFFLE: "ready", Awaited.DEAL: "idle"}


@dataclass
class _Watch:
    """One device's wait, as the shell times it."""

    # The device took the command (its ACK), or it was first seen awaited with the link up,
    # or the device last reported a step of it.
    taken_at: float | None = None
    progress: tuple[int, ...] | None = None  # the wait's progress when last seen
    replayed_before: int | None = None  # the link's replay counter when it was taken
    disagrees_since: float | None = None  # the device says it is done, the table waits
    told: bool = False  # the stall was handed to the core


class WaitWatch:
    """Times each device's wait and says when it has become a stall."""

    def __init__(
        self, timeouts_s: Mapping[str, float], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.timeouts_s = dict(timeouts_s)
        self.clock = clock
        self._watches = {device: _Watch() for device in timeouts_s}

    def taken(self, device: str) -> None:
        """The device took the command the table waits on (its ACK came back): timed now."""
        watch = self._watches.get(device)
        if watch is not None:
            self._watches[device] = _Watch(taken_at=self.clock())

    def check(
        self, state: TableState, health: Mapping[str, Mapping[str, Any]]
    ) -> list[CommandStalled]:
        """The stalls found now, each handed over once per wait."""
        now = self.clock()
        current = {w.device: w for w in waits(state)}
        stalled: list[CommandStalled] = []
        for device, watch in self._watches.items():
            wait = current.get(device)
            if wait is None:
                if watch.taken_at is not None or watch.told:
                    self._watches[device] = _Watch()  # nothing awaited: the next is new
                continue
            seen = health.get(device, {})
            if watch.told:
                continue
            if seen.get("link") != "up":
                watch.disagrees_since = None  # nothing is known of it: its link-down says so
                continue
            if watch.taken_at is None:
                watch.taken_at = now  # first seen (a deal going on from before a restart)
            if watch.replayed_before is None:
                watch.replayed_before = _count(seen, "events_replayed")
            if watch.progress != wait.progress:
                if watch.progress is not None:
                    watch.taken_at = now  # a step reported: the wait starts again
                watch.progress, watch.disagrees_since = wait.progress, None
            done = seen.get("state") == DONE_STATES[wait.awaited]
            if not done:
                watch.disagrees_since = None
            elif watch.disagrees_since is None:
                watch.disagrees_since = now
            timed_out = now - watch.taken_at >= self.timeouts_s[device]
            disagrees = done and now - (watch.disagrees_since or now) >= MISMATCH_GRACE_S
            if timed_out or disagrees:
                watch.told = True
                stalled.append(self._stall(wait, watch, seen, now))
        return stalled

    def _stall(
        self, wait: Wait, watch: _Watch, seen: Mapping[str, Any], now: float
    ) -> CommandStalled:
        assert watch.taken_at is not None
        state = seen.get("state")
        count = seen.get("card_count")
        return CommandStalled(
            device="shuffler" if wait.device == "shuffler" else "shoe",
            awaited="shuffle" if wait.awaited is Awaited.SHUFFLE else "deal",
            waited_ms=max(0, round((now - watch.taken_at) * 1000)),
            reported=state if isinstance(state, str) else None,
            card_count=count if isinstance(count, int) else None,
            replayed=max(0, _count(seen, "events_replayed") - (watch.replayed_before or 0)),
        )

    def views(self, state: TableState, health: Mapping[str, Mapping[str, Any]]) -> list[WaitView]:
        """What the table waits for, each against what its device reports (status)."""
        now = self.clock()
        found = []
        for wait in waits(state):
            watch = self._watches.get(wait.device, _Watch())
            seen = health.get(wait.device, {})
            reported = seen.get("state") if seen.get("link") == "up" else None
            count = seen.get("card_count")
            found.append(
                WaitView(
                    device=wait.device,
                    awaited=wait.awaited.value,
                    waited_s=None if watch.taken_at is None else round(now - watch.taken_at, 1),
                    stall_after_s=self.timeouts_s.get(wait.device, 0.0),
                    device_reports=reported if isinstance(reported, str) else None,
                    card_count=count if isinstance(count, int) else None,
                    disagrees=reported == DONE_STATES[wait.awaited],
                )
            )
        return found


def _count(health: Mapping[str, Any], name: str) -> int:
    value = health.get(name)
    return value if isinstance(value, int) else 0
