"""The dispatcher: one order for every input, and "no more bets" that waits for nothing.

A lock-out is stepped the moment the GPIO hands it over, with every input queued before it,
rather than at the consumer's next turn: it waits for no commit and no after-commit work
(649a.2(c)(2)). The order the core sees, and the journal keeps, is still the order posted.
"""

from __future__ import annotations

import asyncio

from tablectl.core.effects import Effect
from tablectl.core.events import ChipSensed, Event, LockoutPressed
from tablectl.core.round import Phase, TableState

from .conftest import SimulatedTable


async def test_a_lockout_is_stepped_at_once_with_what_was_queued_before_it(
    table: SimulatedTable,
) -> None:
    await table.wait_phase(Phase.BETTING)
    seen: list[str] = []

    def observe(event: Event, state: TableState, effects: list[Effect]) -> None:
        seen.append(event.TYPE)

    table.daemon.observers.append(observe)
    taken = table.daemon.steps_taken
    # Posted from one loop callback, as the GPIO hands over a batch of edges: a chip, the
    # lock-out, a chip after it. Nothing is awaited in between.
    table.daemon.post(ChipSensed(seat=2, present=True, since_ns=1))
    table.daemon.post(LockoutPressed(at_ns=2, resolution_ns=1))
    stepped_at_post = list(seen)
    table.daemon.post(ChipSensed(seat=3, present=True, since_ns=3))
    assert stepped_at_post == ["chip_sensed", "lockout_pressed"]
    assert seen == stepped_at_post  # the chip after it waits for the consumer's turn
    assert table.daemon.steps_taken == taken + 2

    await table.daemon.wait_until(lambda s: table.daemon.steps_done >= taken + 3, 10)
    ours = ("chip_sensed", "lockout_pressed")  # the shuffler's reports come in between
    assert [t for t in seen if t in ours] == ["chip_sensed", "lockout_pressed", "chip_sensed"]
    assert table.state.phase is Phase.LOCKED
    # The journal holds the inputs in the order they were posted, each once.
    assert table.daemon.store is not None
    inputs = [row.type for row in table.daemon.store.inputs() if row.type in ours]
    assert inputs[-3:] == ["chip_sensed", "lockout_pressed", "chip_sensed"]


async def test_a_lockout_while_commits_are_in_flight_keeps_their_order(
    table: SimulatedTable,
) -> None:
    """Chips stepped and being written, more queued, then the lock-out: every input is
    journaled once, in the order posted, and the lock-out's own commit follows theirs."""
    await table.wait_phase(Phase.BETTING)
    taken = table.daemon.steps_taken
    posted = []
    for n in range(200):
        table.daemon.post(ChipSensed(seat=1 + n % 6, present=n // 6 % 2 == 0, since_ns=n))
        posted.append("chip_sensed")
        if n % 40 == 39:  # the consumer takes a batch and hands it to the journal
            await asyncio.sleep(0.002)
    table.daemon.post(LockoutPressed(at_ns=10_000, resolution_ns=1))
    posted.append("lockout_pressed")
    await table.daemon.wait_until(lambda s: table.daemon.steps_done >= taken + len(posted), 15)
    assert table.daemon.store is not None
    ours = ("chip_sensed", "lockout_pressed")  # the shuffler's reports come in between
    journaled = [row.type for row in table.daemon.store.inputs() if row.type in ours]
    assert journaled[-len(posted) :] == posted
    assert len(journaled) == len(posted)  # each once, and nothing else of ours
