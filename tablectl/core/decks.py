"""The decks' life at the table: identity, alternation, age and stub counts. Pure.

649a.3, 653a.3 (and Let It Ride's 643a.3, whose text is not among those held here: the same
rules, applied by analogy): with a shuffler, two decks whose backs differ alternate, each
used for every other round (649a.3(b)); decks are changed at least every 4 hours dealt by
hand, 8 hours from a shoe (649a.3(c)). Without a shuffler that counts each deck, the dealer
counts the stub at least once every 5 rounds (649a.8(f), 649a.9(d), 649a.10(d); 653a.8(f),
653a.9(d), 653a.10(d); 643a.8(f), 643a.9(d), 643a.10(d)).

A round opened before its deck's limit is not dealt after it (649a.3(c)): the age is asked
again when the deal starts (the shoe's deal, or "no more bets" where the dealer deals), and
the round waits for a new deck or is void. A dealer's stub count that the shoe's reads
contradict is questioned, both shown, until the dealer confirms which. A table with no round
for its idle time asks for the idle procedure before the next (649a.5(f), 653a.5(f); 643a.5(f)
by analogy, its text not held here): the cards spread for inspection, then the deck from the
table shuffled in place of the one in the shuffler.

The core never reads a clock: decks age on the times the inputs carry (a deck's
introduction, the shell's DeckClock and TableIdle), so a journal replays to the same
decisions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypedDict, Unpack

from pydantic import BaseModel, ConfigDict

from tablectl.core.compat import later
from tablectl.core.events import DeckRules
from tablectl.core.games.base import Procedure, TableGame
from tablectl.util.frozen import replaced

HOUR_MS = 3_600_000
# 649a.3(c)(1)-(2), 653a.3(c)(1)-(2): the text's longest life of a deck.
MAX_AGE_BY_HAND_MS = 4 * HOUR_MS
MAX_AGE_FROM_SHOE_MS = 8 * HOUR_MS
# 649a.8(f), 653a.8(f), 643a.8(f): at least once every 5 rounds.
MAX_ROUNDS_BETWEEN_STUB_COUNTS = 5


MINUTE_MS = 60_000


def duration_text(ms: int) -> str:
    """A time as a person reads it, in whole hours and minutes: "7 h 45 min", "8 h", "12 min"
    (a deck's age, its time to its limit, an idle table)."""
    minutes = max(0, ms) // MINUTE_MS
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" if not minutes else f"{hours} h {minutes:02d} min"


def max_age_ms(procedure: Procedure) -> int:
    """The text's limit for how the cards are dealt (649a.3(c))."""
    return MAX_AGE_BY_HAND_MS if procedure is Procedure.HAND else MAX_AGE_FROM_SHOE_MS


def age_rule(game: TableGame) -> str:
    return f"{chapter(game)}.3(c)({1 if game.procedure is Procedure.HAND else 2})"


def idle_rule(game: TableGame) -> str:
    """649a.5(f), 653a.5(f); Let It Ride's 643a.5 is not among the texts held: by analogy."""
    return f"{chapter(game)}.5(f)"


def alternation_rule(game: TableGame) -> str:
    return f"{chapter(game)}.3(b)(3)"


def chapter(game: TableGame) -> str:
    """The game's chapter (649a, 653a, 643a), from the rule its irregularities cite."""
    return game.void_reasons()["shoe-jam"].split(".")[0]


def stub_rules(game: TableGame) -> tuple[str, str, str]:
    """The stub-count rules of the game's dealing procedure: how often, 52, and not 52."""
    c = chapter(game)
    match game.procedure:
        case Procedure.MANUAL_SHOE:
            return f"{c}.8(f)", f"{c}.8(g)", f"{c}.8(h)"
        case Procedure.HAND:
            return f"{c}.9(d)", f"{c}.9(e)", f"{c}.9(f)"
        case _:
            return f"{c}.10(d)", f"{c}.10(e)", f"{c}.10(f)"


class DeckEntry(BaseModel):
    """One deck at the table: its id, back colour and when it came (UTC milliseconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    deck_id: str
    back: str
    introduced_ms: int
    warned: bool = False  # its age warning is journaled
    expired: bool = False  # its age limit is journaled: it blocks the next round

    def age_ms(self, now_ms: int | None) -> int:
        return 0 if now_ms is None else max(0, now_ms - self.introduced_ms)

    def replace(self, **update: Unpack[DeckEntryUpdate]) -> DeckEntry:
        """A copy with the fields named changed; mypy checks each name and its type."""
        return replaced(self, update)


class DeckEntryUpdate(TypedDict, total=False):
    """Any of DeckEntry's fields, each with its type: what `DeckEntry.replace` takes."""

    deck_id: str
    back: str
    introduced_ms: int
    warned: bool
    expired: bool


class DeckLife(BaseModel):
    """The decks at the table and what is due of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decks: tuple[DeckEntry, ...] = ()
    now_ms: int | None = None  # the latest time an input carried
    round_deck: str | None = None  # the deck of the round in play, or of the last round
    previous_round_deck: str | None = None  # the deck of the round before that
    rounds_since_stub_count: int = 0  # rounds opened since the stub was last counted
    shoe_read: int | None = None  # cards the shoe read this round (a stub count derives)
    stub_count_asked: bool = False  # the count is due and the table said so (journaled once)
    # The dealer's count that the shoe's reads contradict, until the dealer confirms which.
    stub_questioned: int | None = later(None)
    # The round whose deck passed its age before the deal (journaled once): not dealt.
    age_held_round: int | None = later(None)
    # When the idle procedure fell due (UTC milliseconds); None: not due (649a.5(f)).
    idle_due_ms: int | None = later(None)

    def find(self, deck_id: str | None) -> DeckEntry | None:
        return next((d for d in self.decks if d.deck_id == deck_id), None)

    def by_back(self, back: str) -> DeckEntry | None:
        return next((d for d in self.decks if d.back == back), None)

    def next_deck(self, rules: DeckRules) -> DeckEntry | None:
        """The deck the next round is dealt from: with two alternating decks, the one that
        did not play the last round (649a.3(b)(3))."""
        if not self.decks:
            return None
        if rules.alternate and self.round_deck is not None:
            other = [d for d in self.decks if d.deck_id != self.round_deck]
            if other:
                return other[0]
        return self.decks[0]

    def with_deck(self, deck: DeckEntry) -> DeckLife:
        return self.replace(
            decks=tuple(deck if d.deck_id == deck.deck_id else d for d in self.decks)
        )

    def replace(self, **update: Unpack[DeckLifeUpdate]) -> DeckLife:
        """A copy with the fields named changed; mypy checks each name and its type."""
        return replaced(self, update)


class DeckLifeUpdate(TypedDict, total=False):
    """Any of DeckLife's fields, each with its type: what `DeckLife.replace` takes."""

    decks: tuple[DeckEntry, ...]
    now_ms: int | None
    round_deck: str | None
    previous_round_deck: str | None
    rounds_since_stub_count: int
    shoe_read: int | None
    stub_count_asked: bool
    stub_questioned: int | None
    age_held_round: int | None
    idle_due_ms: int | None


class DeckBlock(StrEnum):
    """Why no round may open, as far as the decks go."""

    MISSING = "deck-missing"  # fewer decks introduced than the table plays with
    AGE = "deck-age"  # a deck reached its age limit (649a.3(c))
    STUB_COUNT = "stub-count"  # the stub count is due (649a.8(f) ...)
    IDLE = "idle-procedure"  # no round for the idle time: the procedure first (649a.5(f))


def decks_needed(rules: DeckRules) -> int:
    return 2 if rules.alternate else 1


def block(rules: DeckRules, life: DeckLife) -> DeckBlock | None:
    """What of the decks holds the next round, if anything (the first cause, in order)."""
    if len(life.decks) < decks_needed(rules):
        return DeckBlock.MISSING
    if any(d.age_ms(life.now_ms) >= rules.max_age_ms for d in life.decks):
        return DeckBlock.AGE
    if stub_count_due(rules, life):
        return DeckBlock.STUB_COUNT
    if life.idle_due_ms is not None:
        return DeckBlock.IDLE
    return None


def too_old_to_deal(life: DeckLife) -> DeckEntry | None:
    """The round's deck, if it has reached its age limit (649a.3(c)): it is not dealt."""
    deck = life.find(life.round_deck)
    return deck if deck is not None and deck.expired else None


def stub_count_due(rules: DeckRules, life: DeckLife) -> bool:
    every = rules.stub_count_every_rounds
    return every is not None and life.rounds_since_stub_count >= every


def rounds_to_stub_count(rules: DeckRules, life: DeckLife) -> int | None:
    """Rounds that may still open before the stub must be counted (None: not counted)."""
    every = rules.stub_count_every_rounds
    return None if every is None else max(0, every - life.rounds_since_stub_count)


def next_due_ms(rules: DeckRules, life: DeckLife) -> int | None:
    """When the shell should next tell the core the time: a deck's warning or its limit."""
    due: list[int] = []
    for d in life.decks:
        limit = d.introduced_ms + rules.max_age_ms
        if not d.warned and rules.warn_before_ms > 0:
            due.append(limit - rules.warn_before_ms)
        if not d.expired:
            due.append(limit)
    return min(due) if due else None
