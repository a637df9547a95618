"""The round machine for every game, as rooms a reader can find by name. Pure.

`step(rules, state, input) -> (state, effects)` in step.py, with its dispatch table (input
type -> handler); the state and its typed updates in state.py; one module per concern for the
handlers: wagering.py (sensors, the lock-out, the count, stuck inputs), shuffler.py,
deck_rules.py (the decks a table keeps), deal.py (the shoe), settlement.py (payouts, hits,
Envy Bonuses, the floor's workflow), void.py, faults.py (devices: identity, refused events,
stalls), journal.py (delivery and the journal's checks), link.py (a linked progressive).
What the rest of tablectl uses is imported from here.
"""

from tablectl.core.table.faults import waits
from tablectl.core.table.state import (
    HIT_HISTORY,
    CounterName,
    Counters,
    Deal,
    HitEntry,
    Phase,
    RefusedEvent,
    Rejected,
    StuckCause,
    StuckInput,
    TableState,
)
from tablectl.core.table.step import HANDLERS, step

__all__ = [
    "HANDLERS",
    "HIT_HISTORY",
    "CounterName",
    "Counters",
    "Deal",
    "HitEntry",
    "Phase",
    "RefusedEvent",
    "Rejected",
    "StuckCause",
    "StuckInput",
    "TableState",
    "step",
    "waits",
]
