"""The inputs time brings: a deck's warning and age limit (649a.3(c)), the idle table's
procedure (649a.5(f)), and a device's wait become a stall (service/waits.py). The core never
reads a clock, so its decisions replay: it is told the time, here, when something falls due.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from tablectl.core import decks
from tablectl.core.events import DeckClock, Event, TableIdle, TableRules
from tablectl.core.table import TableState

if TYPE_CHECKING:
    from tablectl.service.devices import DeviceSupervisor
    from tablectl.store.journal import JournalReader


log = structlog.get_logger(__name__)
DECK_CLOCK_SETTLE_S = 1.0  # after a DeckClock, before the deck clock looks again
# The rows after which a table is not idle (649a.5(f)): a round's "no more bets", the idle
# procedure done, a deck come to the table (inspected as it came, 649a.4).
IDLE_ENDS = ("round.locked", "deck.idle_procedure_done", "deck.introduced")
WAIT_CHECK_S = 1.0  # how often the waits on the devices are timed (service/waits.py)


def _ts_ms(ts: str) -> int:
    """A journal row's time (ISO 8601, UTC) in UTC milliseconds."""
    return round(datetime.fromisoformat(ts).timestamp() * 1000)


class TableClocks:
    """Looks at the clocks and posts the input due; each look is a method tests call."""

    def __init__(
        self,
        rules: TableRules,
        supervisor: DeviceSupervisor,
        *,
        post: Callable[[Event], None],
        state: Callable[[], TableState | None],
        reader: Callable[[], JournalReader | None],
        wall_clock_ms: Callable[[], int],
        started_at: float,
    ) -> None:
        self.rules = rules
        self.supervisor = supervisor
        self.post = post
        self._state = state
        self._reader = reader
        self.wall_clock_ms = wall_clock_ms
        self.started_at = started_at  # this start, in seconds since the epoch
        self._idle_told_ms: int | None = None  # the core was last told of an idle table

    async def deck_clock(self) -> None:
        """Tell the core the time whenever a deck's warning or age limit (649a.3(c)) or the
        idle procedure (649a.5(f)) falls due; the core never reads a clock, so its decisions
        replay."""
        if self.rules.deck is None:
            return
        while True:
            delay_s = self.deck_clock_tick()
            await asyncio.sleep(delay_s)

    def deck_clock_tick(self) -> float:
        """One look at the decks' clock (the loop above; tests on a clock): the input due now,
        if any, and how long until the next look (seconds)."""
        deck_rules = self.rules.deck
        state = self._state()
        if deck_rules is None or state is None:
            return 60.0
        due = decks.next_due_ms(deck_rules, state.deck)
        now = self.wall_clock_ms()
        if due is not None and due <= now:
            self.post(DeckClock(at_ms=now))
            return DECK_CLOCK_SETTLE_S  # until the core has taken it
        idle = self._idle_due(deck_rules.idle_ms, state)
        if idle is not None and idle[1] <= now:
            self.post(TableIdle(since_ms=idle[0], at_ms=now))
            self._idle_told_ms = now  # not told again for another idle time
            return DECK_CLOCK_SETTLE_S
        # A deck introduced or a round locked meanwhile brings its own times: a minute.
        nearest = min(
            (t for t in (due, None if idle is None else idle[1]) if t is not None), default=None
        )
        return min(60.0, 60.0 if nearest is None else (nearest - now) / 1000)

    def _idle_due(self, idle_ms: int | None, state: TableState) -> tuple[int, int] | None:
        """(since, due): the last activity -- a round's "no more bets", the last idle
        procedure, a deck introduced, this start -- and when the idle time runs out from it
        (or from the last time the core was told, if it found the table in play)."""
        reader = self._reader()
        if idle_ms is None or state.deck.idle_due_ms is not None or reader is None:
            return None
        row = reader.last_row(IDLE_ENDS, {})
        since = round(self.started_at * 1000) if row is None else _ts_ms(row[1])
        told = self._idle_told_ms
        return since, max(since, told or 0) + idle_ms

    async def watch_waits(self) -> None:
        """A shuffle or deal a device took and never completed becomes a journaled fault
        (service/waits.py decides on its clock; the core journals it if it still waits)."""
        while True:
            await asyncio.sleep(WAIT_CHECK_S)
            self.check_waits()

    def check_waits(self) -> None:
        """Hand the core each wait that has become a stall (the loop above; tests on a clock)."""
        for stalled in self.supervisor.stalls():
            log.warning("a device command stalled", **stalled.model_dump())
            self.post(stalled)
