"""What the table waits for from its devices, and a wait that never ends. Pure.

A shuffle the shuffler took, or a deal the shoe took, is a wait: the core's state says what it
waits for (`round.waits`), the shell says since when and what the device reports, and decides
when a wait has lasted too long (service/waits.py, on its clock, as it decides a link lost).
The decision reaches the core as an input (`CommandStalled`), so a replay reaches the same
faults without a clock input at every shuffle and deal.

A stalled shuffle is a shuffler that failed to complete a shuffle cycle: the cards are
reshuffled (649a.13(e), 653a.13(e), 643a.13(e)). A stalled deal is a shoe that stopped
dealing: the round is void and every wager returned (649a.13(f)). A shuffler that says it is
ready with other than 52 cards has revealed a miscount (649a.5(b)), whether or not its
completion reached the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from tablectl.core.events import CommandStalled
from tablectl.core.games.base import DECK_SIZE


class Awaited(StrEnum):
    SHUFFLE = "shuffle"  # the shuffler took SHUFFLE: its completion (a count) is awaited
    DEAL = "deal"  # the shoe took DEAL: every stack of the plan and its completion


@dataclass(frozen=True, slots=True)
class Wait:
    """One thing the table waits for from a device; `progress` changes whenever the device
    reports a step of it (a shuffle started, a card read), which starts the wait again."""

    device: str
    awaited: Awaited
    progress: tuple[int, ...]


class Stall(BaseModel):
    """A wait that never ended, as the fault it became keeps it (until it is cleared)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    awaited: Awaited
    waited_ms: int
    reported: str | None  # the device's state in its last STATUS
    card_count: int | None
    replayed: int  # events it listed again under ids already taken

    @classmethod
    def of(cls, event: CommandStalled) -> Stall:
        return cls(
            awaited=Awaited(event.awaited),
            waited_ms=event.waited_ms,
            reported=event.reported,
            card_count=event.card_count,
            replayed=event.replayed,
        )


def rule(chapter: str, awaited: Awaited) -> str:
    """The irregularity a stall is: a shuffle cycle not completed, or a shoe that stopped."""
    return f"{chapter}.13(e)" if awaited is Awaited.SHUFFLE else f"{chapter}.13(f)"


def miscount(stall: Stall) -> int | None:
    """The count a shuffler showed ready with, when it is not 52 (649a.5(b)), else None."""
    if stall.awaited is not Awaited.SHUFFLE or stall.reported != "ready":
        return None
    if stall.card_count is None or stall.card_count == DECK_SIZE:
        return None
    return stall.card_count


def action(awaited: Awaited) -> str:
    if awaited is Awaited.SHUFFLE:
        return "the cards are reshuffled: `tablectl dealer reshuffle --by ID`"
    return (
        "the round is void; take every card out of the shoe: `tablectl dealer clear-shoe --by ID`"
    )
