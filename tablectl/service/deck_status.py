"""What status shows of the decks (core/decks.py): each deck's age and time to its limit, the
stub count due, and what holds the next round with the command that clears it.

Ages and limits are said in whole hours and minutes; the limit is the table's own
(`deck.max_age_hours`) and 649a.3(c) is the ceiling it may not pass."""

from __future__ import annotations

from datetime import UTC, datetime

from tablectl.core import decks
from tablectl.core.events import DeckRules
from tablectl.core.games.base import DECK_SIZE, Procedure, TableGame
from tablectl.core.table import Phase, TableState
from tablectl.service.faults import WHO
from tablectl.status import DecksView, DeckView, FaultView, Stops


def _utc(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


def view(rules: DeckRules, state: TableState, now_ms: int) -> DecksView:
    life = state.deck
    due = life.next_deck(rules)
    block = decks.block(rules, life)
    return DecksView(
        decks=[
            DeckView(
                deck_id=d.deck_id,
                back=d.back,
                introduced_utc=_utc(d.introduced_ms),
                age_ms=d.age_ms(now_ms),
                to_limit_ms=max(0, rules.max_age_ms - d.age_ms(now_ms)),
                in_play=d.deck_id == life.round_deck,
                next=due is not None and d.deck_id == due.deck_id,
            )
            for d in life.decks
        ],
        max_age_ms=rules.max_age_ms,
        warn_before_ms=rules.warn_before_ms,
        alternate=rules.alternate,
        stub_count_every_rounds=rules.stub_count_every_rounds,
        rounds_since_stub_count=life.rounds_since_stub_count,
        stub_count_due=decks.stub_count_due(rules, life),
        rounds_to_stub_count=decks.rounds_to_stub_count(rules, life),
        stub_expected=None if life.shoe_read is None else DECK_SIZE - life.shoe_read,
        stub_questioned=life.stub_questioned,
        idle_minutes=None if rules.idle_ms is None else rules.idle_ms // decks.MINUTE_MS,
        idle_procedure_due_utc=None if life.idle_due_ms is None else _utc(life.idle_due_ms),
        blocked_by=None if block is None else block.value,
    )


def limit_text(rules: DeckRules, game: TableGame) -> str:
    """The table's own limit, and the text's ceiling above it (649a.3(c))."""
    ceiling = decks.max_age_ms(game.procedure)
    dealt = "by hand" if game.procedure is Procedure.HAND else "from a shoe"
    text = f"{decks.age_rule(game)} allows at most {decks.duration_text(ceiling)} dealt {dealt}"
    if rules.max_age_ms >= ceiling:
        return f"this table changes its decks every {decks.duration_text(ceiling)}, as {text}"
    own = decks.duration_text(rules.max_age_ms)
    return f"this table changes its decks every {own} (deck.max_age_hours); {text}"


def with_deck_ids(faults: list[FaultView]) -> list[FaultView]:
    """At a table that keeps its decks, a new deck is introduced with its id and back."""
    plain = f"tablectl dealer new-deck {WHO}"
    wanted = f"tablectl dealer new-deck --id ID --back COLOUR {WHO}"
    return [f.model_copy(update={"command": wanted}) if f.command == plain else f for f in faults]


def deck_faults(
    rules: DeckRules, game: TableGame, state: TableState, now_ms: int
) -> list[FaultView]:
    """What the decks hold, each with the command that clears it; a deck near its limit is
    shown too (it stops nothing yet)."""
    life = state.deck
    chapter = decks.chapter(game)
    found: list[FaultView] = []
    needed = decks.decks_needed(rules)
    two = f" (two decks of different backs alternate, {chapter}.3(b))" if needed > 1 else ""
    if len(life.decks) < needed:
        have = ", ".join(d.deck_id for d in life.decks) or "none"
        found.append(
            FaultView(
                what="deck-missing",
                device="deck",
                cause=f"the table plays {needed} deck(s) and knows {have}: each deck is "
                f"introduced with its id and back colour{two}",
                stops=Stops.ROUNDS,
                remedy="bring the deck to the shuffler and introduce it",
                command=f"tablectl dealer new-deck --id ID --back COLOUR {WHO}",
                rule=f"{chapter}.3",
            )
        )
    age_rule = decks.age_rule(game)
    limit = limit_text(rules, game)
    held = decks.too_old_to_deal(life) if life.age_held_round == state.round_id else None
    for d in life.decks:
        age = d.age_ms(life.now_ms)
        if age >= rules.max_age_ms:
            in_play = held is not None and held.deck_id == d.deck_id and state.phase is Phase.LOCKED
            found.append(
                FaultView(
                    what="deck-age",
                    device="deck",
                    cause=f"deck {d.deck_id} ({d.back}) is {decks.duration_text(age)} old: {limit}"
                    + (
                        f"; round {state.round_id} opened on it before its limit and is not "
                        "dealt from it"
                        if in_play
                        else ""
                    ),
                    stops=Stops.ROUNDS,
                    remedy=f"replace deck {d.deck_id} with a new one"
                    + (
                        " and deal the round from it, or void the round (`tablectl dealer void "
                        "deck-age`)"
                        if in_play
                        else ""
                    ),
                    command=f"tablectl dealer new-deck --id ID --back {d.back} "
                    f"--replaces {d.deck_id} {WHO}",
                    rule=age_rule,
                )
            )
        elif d.age_ms(now_ms) >= rules.max_age_ms - rules.warn_before_ms:
            left = max(0, rules.max_age_ms - d.age_ms(now_ms))
            found.append(
                FaultView(
                    what="deck-age-warning",
                    device="deck",
                    cause=f"deck {d.deck_id} ({d.back}) is {decks.duration_text(d.age_ms(now_ms))}"
                    f" old and reaches its limit in {decks.duration_text(left)} ({limit}); then "
                    "no round opens until it is replaced, and a round opened before is not "
                    "dealt from it",
                    stops=Stops.NOTHING,
                    remedy=f"bring the deck that replaces {d.deck_id}",
                    command=f"tablectl dealer new-deck --id ID --back {d.back} "
                    f"--replaces {d.deck_id} {WHO}",
                    rule=age_rule,
                )
            )
    if life.stub_questioned is not None and life.shoe_read is not None:
        counted, read = life.stub_questioned, life.shoe_read
        found.append(
            FaultView(
                what="stub-count-questioned",
                device="deck",
                cause=f"your stub count says the deck holds {counted} cards (a stub of "
                f"{counted - read} after the {read} cards the shoe read this round); the "
                f"shoe's reads leave a stub of {DECK_SIZE - read} from a whole deck of "
                f"{DECK_SIZE}",
                stops=Stops.ROUNDS,
                remedy="count the stub again face down; if the shoe's reads are right, confirm "
                f"them (`tablectl dealer stub-count {WHO}`), else confirm your count",
                command=f"tablectl dealer stub-count {counted} --confirm {WHO}",
                rule=decks.stub_rules(game)[0],
            )
        )
    if life.idle_due_ms is not None and rules.idle_ms is not None:
        idle_rule = decks.idle_rule(game)
        found.append(
            FaultView(
                what="idle-procedure",
                device="deck",
                cause=f"no round for {decks.duration_text(rules.idle_ms)} or more (deck."
                f"idle_minutes): the cards lay on a table open for gaming ({idle_rule})",
                stops=Stops.ROUNDS,
                remedy="take the cards out of the shoe and discard rack and spread them face "
                "down (face up if a player asks); once the first player to arrive has had the "
                "chance to inspect them, stack them and place them in the shuffler to be "
                "shuffled, and remove the deck that was in it; then confirm",
                command=f"tablectl dealer idle-procedure {WHO}",
                since=_utc(life.idle_due_ms),
                rule=idle_rule,
            )
        )
    if decks.stub_count_due(rules, life):
        derived = life.shoe_read is not None
        during = (
            " (or during the next round, after its deal)" if state.phase is Phase.CLOSED else ""
        )
        found.append(
            FaultView(
                what="stub-count-due",
                device="deck",
                cause=f"the stub was last counted {life.rounds_since_stub_count} rounds ago: it "
                f"is counted at least once every {rules.stub_count_every_rounds} rounds",
                stops=Stops.ROUNDS,
                remedy="count the stub face down on the layout and enter the cards the deck "
                f"holds{during}"
                + ("; the shoe's reads give the count: confirm it" if derived else ""),
                command=f"tablectl dealer stub-count {'' if derived else 'N '}{WHO}",
                rule=decks.stub_rules(game)[0],
            )
        )
    return found
