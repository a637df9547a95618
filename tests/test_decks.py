"""The decks' life in the pure core, for every game: identity, alternation, age, stub counts.

649a.3(b)(3), 653a.3(b)(3): "Both decks are continuously alternated in and out of play, with
each deck being used for every other round of play."
649a.3(c), 653a.3(c): "The decks of cards ... shall be changed at least every: (1) Four hours
if the cards are dealt by hand. (2) Eight hours if the cards are dealt from a manual or
automated dealing shoe."
649a.8(f), 649a.9(d), 649a.10(d) (653a and 643a the same): "the dealer shall count the stub at
least once every 5 rounds of play"; (g)/(e): 52 cards, the stub goes to the discard rack;
(h)/(f): "If the cards were misdealt ... but 52 cards remain in the deck, all hands shall be
void and all wagers shall be returned to the players. If the cards were not misdealt, all
hands shall be void, all wagers shall be returned to the players and the entire deck of cards
shall be removed from the table."
Let It Ride's 643a.3 is not among the texts held (docs/decks.md): its rules are applied by
analogy and cited as 643a.3.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tablectl.core import effects as rec
from tablectl.core.decks import next_due_ms
from tablectl.core.effects import Effect
from tablectl.core.events import (
    ChipSensed,
    DealRequested,
    DeckClock,
    DeckInPlay,
    DeckIntroduced,
    DeckRules,
    Event,
    IdleProcedureDone,
    LockoutPressed,
    LockoutReleased,
    PowerUp,
    Settle,
    ShoeCard,
    ShoeDealCompleted,
    ShoeStackDealt,
    ShuffleCompleted,
    ShuffleStarted,
    StubCounted,
    TableIdle,
    TableRules,
    VoidRound,
)
from tablectl.core.table import Phase, Rejected, TableState, step
from tablectl.rules.cards import parse_cards
from tablectl.service.deck_status import deck_faults
from tablectl.service.deck_status import view as deck_view
from tablectl.service.replay import replay
from tablectl.store.journal import Store

from .test_table_core import lir, tcp, uth

R = TypeVar("R", bound=rec.Record)
JOURNALS = Path(__file__).parent / "journals"
MIN = 60_000
HOUR = 60 * MIN
T0 = 1_780_000_000_000  # some afternoon in 2026, UTC milliseconds
# The community cards each game's settlement needs when no hand is shown.
COMMUNITY = {"three-card-poker": "", "ultimate-texas-holdem": "AhKh9c2d3s", "let-it-ride": "AhKh"}
GAMES: dict[str, tuple[str, Callable[[], TableRules]]] = {
    "three-card-poker": ("649a", tcp),
    "ultimate-texas-holdem": ("653a", uth),
    "let-it-ride": ("643a", lir),
}


def with_decks(
    base: TableRules,
    *,
    alternate: bool = True,
    every: int | None = None,
    max_age_ms: int = 8 * HOUR,
    warn_ms: int = 15 * MIN,
    shoe: bool = False,
) -> TableRules:
    deck = DeckRules(
        max_age_ms=max_age_ms,
        warn_before_ms=warn_ms,
        stub_count_every_rounds=every,
        alternate=alternate,
    )
    return base.model_copy(update={"deck": deck, "shoe": shoe})


def run(
    rules: TableRules, events: list[Event], state: TableState | None = None
) -> tuple[TableState, list[Effect]]:
    state = state or TableState.initial(rules)
    out: list[Effect] = []
    for event in events:
        state, fx = step(rules, state, event)
        out += fx
    return state, out


def records(fx: list[Effect], cls: type[R]) -> list[R]:
    return [e for e in fx if isinstance(e, cls)]


def introduced(rules: TableRules, at_ms: int = T0) -> TableState:
    events: list[Event] = [PowerUp(rules=rules)]
    events.append(DeckIntroduced(deck_id="D1", back="red", at_ms=at_ms, by="d1"))
    if rules.deck is not None and rules.deck.alternate:
        events.append(DeckIntroduced(deck_id="D2", back="blue", at_ms=at_ms, by="d1"))
    return run(rules, events)[0]


def shuffled() -> list[Event]:
    return [ShuffleStarted(), ShuffleCompleted(card_count=52)]


def played(rules: TableRules, *seats: int) -> list[Event]:
    """One round with table-system wagers at `seats`, locked, collected and settled."""
    community = parse_cards(COMMUNITY[rules.game.name])
    folded = frozenset(seats)  # every player folds: no hand to show
    return [*locked(*seats), Settle(community=community, folded=folded, by="d1")]


def locked(*seats: int) -> list[Event]:
    return [
        *shuffled(),
        *(ChipSensed(seat=s, present=True, since_ns=1) for s in seats),
        LockoutPressed(at_ns=10),
        LockoutReleased(at_ns=20),
        *(ChipSensed(seat=s, present=False, since_ns=30) for s in seats),
    ]


# --- introduction ---------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_no_round_opens_before_the_table_knows_its_decks(game: str) -> None:
    chapter, base = GAMES[game]
    rules = with_decks(base())
    state, fx = run(rules, [PowerUp(rules=rules), *shuffled()])
    assert state.phase is Phase.CLOSED and not records(fx, rec.RoundOpened)
    state, fx = run(rules, [DeckIntroduced(deck_id="D1", back="red", at_ms=T0)], state)
    assert state.phase is Phase.CLOSED  # 649a.3(b): two decks alternate; one is known
    state, fx = run(
        rules, [DeckIntroduced(deck_id="D2", back="blue", at_ms=T0), *shuffled()], state
    )
    assert state.phase is Phase.BETTING and state.deck.round_deck == "D1"
    intro = records(
        run(rules, [PowerUp(rules=rules), DeckIntroduced(deck_id="X", back="red", at_ms=T0)])[1],
        rec.DeckIntroducedRecord,
    )
    assert intro[0].rule == f"{chapter}.3" and intro[0].max_age_ms == 8 * HOUR


@pytest.mark.parametrize("game", GAMES)
def test_the_two_decks_backs_differ_in_colour(game: str) -> None:
    chapter, base = GAMES[game]
    rules = with_decks(base())
    state = run(rules, [PowerUp(rules=rules), DeckIntroduced(deck_id="D1", back="red", at_ms=T0)])[
        0
    ]
    with pytest.raises(Rejected, match=rf"backs .*differ in colour \({chapter}\.3\(b\)\(1\)\)"):
        step(rules, state, DeckIntroduced(deck_id="D2", back="red", at_ms=T0))


def test_a_third_deck_names_the_one_it_replaces() -> None:
    rules = with_decks(tcp())
    state = introduced(rules)
    with pytest.raises(Rejected, match="--replaces"):
        step(rules, state, DeckIntroduced(deck_id="D3", back="green", at_ms=T0))
    with pytest.raises(Rejected, match="deck D9 is not at the table"):
        step(rules, state, DeckIntroduced(deck_id="D3", back="green", at_ms=T0, replaces="D9"))
    state, fx = step(
        rules, state, DeckIntroduced(deck_id="D3", back="green", at_ms=T0, replaces="D1")
    )
    assert [d.deck_id for d in state.deck.decks] == ["D2", "D3"]
    assert records(fx, rec.DeckIntroducedRecord)[0].replaces == "D1"


def test_a_table_without_deck_rules_refuses_deck_commands() -> None:
    rules = tcp()
    state = run(rules, [PowerUp(rules=rules)])[0]
    with pytest.raises(Rejected, match=r"no \[deck\] section \(649a\.3\)"):
        step(rules, state, DeckIntroduced(deck_id="D1", back="red", at_ms=T0))
    assert step(rules, state, DeckClock(at_ms=T0))[1] == []


# --- alternation ----------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_a_round_dealt_from_the_deck_of_the_previous_round_is_refused(game: str) -> None:
    chapter, base = GAMES[game]
    rules = with_decks(base())
    state, _ = run(rules, played(rules), introduced(rules))  # round 1 on D1
    state, _ = run(rules, shuffled(), state)  # round 2 opens: D2 is due
    assert state.round_id == 2 and state.deck.round_deck == "D2"
    with pytest.raises(
        Rejected, match=rf"deck D1 played the previous round.*{chapter}\.3\(b\)\(3\)"
    ):
        step(rules, state, DeckInPlay(deck_id="D1", by="d1"))
    state, _ = step(rules, state, DeckInPlay(deck_id="D2", by="d1"))
    # ... and they keep alternating: round 3 is D1's again.
    state, _ = run(
        rules,
        [
            LockoutPressed(at_ns=10),
            LockoutReleased(at_ns=20),
            Settle(community=parse_cards(COMMUNITY[game])),
        ],
        state,
    )
    state, _ = run(rules, shuffled(), state)
    assert state.deck.round_deck == "D1" and state.deck.previous_round_deck == "D2"


def shoe_round(state: TableState, rules: TableRules, back: str) -> tuple[TableState, list[Effect]]:
    """The shoe deals seat 2 and the dealer (Three Card Poker), the cards with this back."""
    deal: list[Event] = [DealRequested(seats=(), by="d1")]
    cards = iter(parse_cards("AsKsQs5d6d8h"))
    for _ in range(2):
        deal += [ShoeCard(card=next(cards), back=back) for _ in range(3)]
        deal.append(ShoeStackDealt(cards=3))
    deal.append(ShoeDealCompleted(cards=6))
    return run(rules, deal, state)


def test_the_shoe_reading_the_other_decks_back_voids_the_round() -> None:
    """649a.3(b)(3): the deck that played the previous round is in the shuffler, not the shoe."""
    rules = with_decks(tcp(), shoe=True)
    state, _ = run(rules, [*locked(2)], introduced(rules))  # round 1: D1 (red)
    state, fx = shoe_round(state, rules, "red")
    assert not records(fx, rec.RoundVoided) and state.deal is not None and state.deal.complete
    state, _ = step(rules, state, Settle(folded=frozenset({2}), by="d1"))
    state, _ = run(rules, locked(2), state)  # round 2: D2 (blue) is due
    state, fx = shoe_round(state, rules, "red")
    (alternation,) = records(fx, rec.DeckAlternation)
    assert alternation.rule == "649a.3(b)(3)" and alternation.deck_id == "D1"
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.rule == "649a.3(b)(3)" and voided.wagers_returned == [2]
    assert state.phase is Phase.CLOSED


def test_a_back_of_no_deck_at_the_table_is_a_foreign_card() -> None:
    rules = with_decks(tcp(), shoe=True)
    state, _ = run(rules, locked(2), introduced(rules))
    state, fx = shoe_round(state, rules, "green")
    (irregular,) = records(fx, rec.DeckIrregular)
    assert irregular.reason == "foreign-back" and irregular.rule == "649a.10(f)"
    assert state.blocked == "deck-irregular:foreign-back" and records(fx, rec.RoundVoided)
    # The deck leaves; its replacement takes its place in the alternation.
    state, fx = step(rules, state, DeckIntroduced(deck_id="D3", back="green", at_ms=T0))
    assert records(fx, rec.DeckIntroducedRecord)[0].replaces == "D1"
    assert state.blocked is None and state.deck.round_deck == "D3"


# --- age ------------------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_a_long_session_crosses_the_decks_age_limit(game: str) -> None:
    """Rounds every 3 minutes from a shoe: a warning 15 minutes before 8 hours, then the next
    round waits until both decks (introduced together) are replaced (649a.3(c)(2))."""
    chapter, base = GAMES[game]
    rules = with_decks(base())
    state = introduced(rules)
    assert rules.deck is not None
    now, rounds = T0, 0
    warned: list[rec.DeckAgeWarning] = []
    expired: list[rec.DeckAgeExpired] = []
    while not expired:
        now += 3 * MIN
        due = next_due_ms(rules.deck, state.deck)
        assert due is not None
        if due <= now:  # the shell tells the core the time when a warning or limit is due
            state, fx = step(rules, state, DeckClock(at_ms=due))
            warned += records(fx, rec.DeckAgeWarning)
            expired += records(fx, rec.DeckAgeExpired)
        state, fx = run(rules, shuffled(), state)
        if records(fx, rec.RoundOpened):
            rounds += 1
            state, _ = run(rules, played(rules)[2:], state)
    assert rounds == 159  # 8 hours of rounds every 3 minutes, the last one before the limit
    assert [w.deck_id for w in warned] == ["D1", "D2"]
    assert {w.age_ms for w in warned} == {8 * HOUR - 15 * MIN}
    assert [e.deck_id for e in expired] == ["D1", "D2"]
    assert {e.rule for e in warned + expired} == {f"{chapter}.3(c)(2)"}
    assert state.phase is Phase.CLOSED and state.deck_ready  # shuffled, but held
    state, fx = step(rules, state, DeckIntroduced(deck_id="D3", back="green", at_ms=now))
    assert records(fx, rec.DeckIntroducedRecord)[0].replaces == "D1"
    assert state.phase is Phase.CLOSED and not records(fx, rec.RoundOpened)  # D2 is old too
    state, fx = run(
        rules, [DeckIntroduced(deck_id="D4", back="blue", at_ms=now), *shuffled()], state
    )
    assert records(fx, rec.DeckIntroducedRecord)[0].replaces == "D2"
    assert state.phase is Phase.BETTING  # the new decks were shuffled and counted


def test_by_hand_the_limit_is_four_hours_and_a_restart_keeps_the_age() -> None:
    """649a.3(c)(1); the deck's age is in the state, so a power-up does not make it young."""
    base = tcp()
    game = base.game.model_copy(update={"dealing": "hand"})
    rules = with_decks(base.model_copy(update={"game": game}), alternate=False, max_age_ms=4 * HOUR)
    state = introduced(rules)
    state, _ = run(rules, [PowerUp(rules=rules), DeckClock(at_ms=T0 + 4 * HOUR)], state)
    assert state.deck.decks[0].expired and state.deck.decks[0].introduced_ms == T0
    state, _fx = run(rules, shuffled(), state)
    assert state.phase is Phase.CLOSED
    rec_fx = run(rules, [DeckClock(at_ms=T0 + 4 * HOUR)], introduced(rules))[1]
    assert {r.rule for r in records(rec_fx, rec.DeckAgeExpired)} == {"649a.3(c)(1)"}


def test_a_clock_set_back_never_makes_a_deck_younger() -> None:
    rules = with_decks(tcp())
    state = introduced(rules)
    state, _ = run(rules, [DeckClock(at_ms=T0 + 8 * HOUR), DeckClock(at_ms=T0)], state)
    assert state.deck.now_ms == T0 + 8 * HOUR and all(d.expired for d in state.deck.decks)


# --- stub counts ----------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_the_stub_is_counted_at_least_once_every_five_rounds(game: str) -> None:
    chapter, base = GAMES[game]
    rules = with_decks(base(), alternate=False, every=5)
    state = introduced(rules)
    for n in range(1, 6):
        state, fx = run(rules, played(rules), state)
        assert records(fx, rec.RoundOpened)
        # The table asks once, when the fifth round is over.
        assert len(records(fx, rec.StubCountDue)) == (n == 5)
    assert records(fx, rec.StubCountDue)[0].rule == f"{chapter}.10(d)"
    state, fx = run(rules, shuffled(), state)
    assert state.phase is Phase.CLOSED and not records(fx, rec.RoundOpened)
    assert state.deck.rounds_since_stub_count == 5
    state, fx = step(rules, state, StubCounted(cards=52, by="d1"))
    (count,) = records(fx, rec.StubCountRecord)
    # 649a.10(e): 52 cards, the stub goes to the discard rack; the next round opens.
    assert count.outcome == "correct" and count.rule == f"{chapter}.10(e)"
    assert state.phase is Phase.BETTING and state.deck.rounds_since_stub_count == 1


@pytest.mark.parametrize("game", GAMES)
def test_a_wrong_stub_count_of_a_misdeal_voids_the_round_and_keeps_the_deck(game: str) -> None:
    chapter, base = GAMES[game]
    rules = with_decks(base(), alternate=False, every=5)
    state, _ = run(rules, locked(3), introduced(rules))
    state, fx = step(rules, state, StubCounted(cards=51, misdealt=True, by="d1"))
    (count,) = records(fx, rec.StubCountRecord)
    assert count.outcome == "misdealt-void" and count.rule == f"{chapter}.10(f)"
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.wagers_returned == [3] and voided.rule == f"{chapter}.10(f)"
    assert state.blocked is None and len(state.deck.decks) == 1
    state, fx = run(rules, shuffled(), state)
    assert state.phase is Phase.BETTING


@pytest.mark.parametrize("game", GAMES)
def test_a_wrong_stub_count_without_a_misdeal_removes_the_deck(game: str) -> None:
    chapter, base = GAMES[game]
    rules = with_decks(base(), alternate=False, every=5)
    state, _ = run(rules, locked(3), introduced(rules))
    state, fx = step(rules, state, StubCounted(cards=51, by="d1"))
    (count,) = records(fx, rec.StubCountRecord)
    assert count.outcome == "deck-removed" and count.rule == f"{chapter}.10(f)"
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.wagers_returned == [3] and voided.reason == "stub-count"
    assert state.blocked == "stub-count:51" and state.deck.decks == ()
    state, fx = run(rules, shuffled(), state)
    assert state.phase is Phase.CLOSED  # no deck at the table
    state, fx = run(rules, [DeckIntroduced(deck_id="D7", back="red", at_ms=T0), *shuffled()], state)
    assert state.phase is Phase.BETTING and state.deck.round_deck == "D7"


@pytest.mark.parametrize(
    ("dealing", "rules_cited"),
    [("manual-shoe", ("8(g)", "8(h)")), ("hand", ("9(e)", "9(f)"))],
)
def test_the_stub_rules_follow_the_dealing_procedure(
    dealing: str, rules_cited: tuple[str, str]
) -> None:
    base = uth()
    rules = with_decks(
        base.model_copy(update={"game": base.game.model_copy(update={"dealing": dealing})}),
        alternate=False,
        every=3,
    )
    state, _ = run(rules, locked(1), introduced(rules))
    fx = step(rules, state, StubCounted(cards=52, by="d1"))[1]
    assert records(fx, rec.StubCountRecord)[0].rule == f"653a.{rules_cited[0]}"
    fx = step(rules, state, StubCounted(cards=50, by="d1"))[1]
    assert records(fx, rec.StubCountRecord)[0].rule == f"653a.{rules_cited[1]}"


def test_a_stub_count_is_refused_where_the_shuffler_counts_and_while_bets_are_taken() -> None:
    rules = with_decks(tcp())
    state, _ = run(rules, locked(1), introduced(rules))
    with pytest.raises(Rejected, match=r"shuffler counts every deck .*649a\.5\(b\)"):
        step(rules, state, StubCounted(cards=52))
    rules = with_decks(tcp(), alternate=False, every=5)
    state, _ = run(rules, shuffled(), introduced(rules))
    with pytest.raises(Rejected, match="taking bets"):
        step(rules, state, StubCounted(cards=52))
    state, _ = run(rules, [LockoutPressed(at_ns=10)], state)
    with pytest.raises(Rejected, match="the deck is whole"):
        step(rules, state, StubCounted(cards=52, misdealt=True))
    with pytest.raises(Rejected, match="no shoe read"):
        step(rules, state, StubCounted())


def test_with_a_reading_shoe_the_stub_count_is_derived_and_confirmed() -> None:
    rules = with_decks(tcp(), alternate=False, every=5, shoe=True)
    state, _ = run(rules, locked(2), introduced(rules))
    state, _ = shoe_round(state, rules, "red")
    assert state.deck.shoe_read == 6
    state, fx = step(rules, state, StubCounted(by="d1"))
    (count,) = records(fx, rec.StubCountRecord)
    assert count.derived_from_shoe and count.cards == 52 and count.outcome == "correct"
    assert state.deck.rounds_since_stub_count == 0


def test_journals_of_revision_2_replay_without_any_deck_block() -> None:
    """Rules journaled before revision 3 keep no decks, even with deck rules given."""
    rules = with_decks(tcp(), every=1).model_copy(update={"revision": 2})
    state, _fx = run(rules, [PowerUp(rules=rules), *played(rules), *shuffled()])
    assert state.round_id == 2 and state.phase is Phase.BETTING
    assert state.deck == TableState.initial(rules).deck


def test_a_journal_written_before_issue_18_replays_identically(tmp_path: Path) -> None:
    """tests/journals/README.md: a demo journal of revision 2 replays to the same rows and
    state hashes (no deck is kept, no round is held for one)."""
    path = tmp_path / "tablectl.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript((JOURNALS / "before-issue-18-demo.sql").read_text())
    store = Store(path, boot_id="check")
    result = replay(store)
    assert result.identical, result.difference
    assert result.rows == store.last_seq > 40
    powered = [row for row in store.inputs() if row.type == "power_up"]
    assert powered and all(row.data["rules"]["revision"] == 2 for row in powered)


def test_status_says_what_holds_the_table_and_the_command_that_clears_it() -> None:
    """A deck near its limit is a warning (it stops nothing); past it, the command names the
    deck to replace; a stub count due names the count to enter (service/deck_status.py)."""
    rules = with_decks(uth(), every=2)
    assert rules.deck is not None
    game = rules.game.table_game()
    state = introduced(rules)
    near = T0 + 8 * HOUR - 10 * MIN
    found = {f.what: f for f in deck_faults(rules.deck, game, state, near)}
    assert found["deck-age-warning"].stops.value == "nothing"
    warning = found["deck-age-warning"].cause
    assert "is 7 h 50 min old and reaches its limit in 10 min" in warning
    assert "this table changes its decks every 8 h, as 653a.3(c)(2) allows at most 8 h" in warning
    state, _ = step(rules, state, DeckClock(at_ms=T0 + 8 * HOUR))
    ages = [f for f in deck_faults(rules.deck, game, state, T0 + 8 * HOUR) if f.what == "deck-age"]
    assert [f.command for f in ages] == [
        "tablectl dealer new-deck --id ID --back red --replaces D1 --by ID",
        "tablectl dealer new-deck --id ID --back blue --replaces D2 --by ID",
    ]
    assert {(f.stops.value, f.rule) for f in ages} == {("rounds", "653a.3(c)(2)")}
    view = deck_view(rules.deck, state, T0 + 8 * HOUR)
    assert view.blocked_by == "deck-age" and view.decks[0].to_limit_ms == 0
    state = introduced(rules)
    for _ in range(2):
        state, _ = run(rules, played(rules), state)
    found = {f.what: f for f in deck_faults(rules.deck, game, state, T0)}
    due = found["stub-count-due"]
    assert due.rule == "653a.10(d)" and due.command == "tablectl dealer stub-count N --by ID"


@pytest.mark.parametrize("game", GAMES)
def test_a_round_opened_on_the_deck_the_shuffler_says_played_the_previous_round_is_void(
    game: str,
) -> None:
    """649a.3(b)(3) from the shuffler's report (DECK): the round its shuffle opened is on the
    deck that played the round before: void, every wager returned; the decks go on."""
    chapter, base = GAMES[game]
    rules = with_decks(base())
    state, _ = run(rules, played(rules), introduced(rules))  # round 1 on D1
    state, _ = run(rules, [*shuffled(), ChipSensed(seat=2, present=True, since_ns=1)], state)
    assert state.round_id == 2 and state.deck.round_deck == "D2" and state.wagers
    state, fx = step(rules, state, DeckInPlay(deck_id="D1", source="shuffler", by="shuffler"))
    (alternation,) = records(fx, rec.DeckAlternation)
    assert alternation.rule == f"{chapter}.3(b)(3)" and alternation.round_voided
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.reason == "deck-alternation" and voided.wagers_returned == [2]
    state, _ = run(rules, [ChipSensed(seat=2, present=False, since_ns=2), *shuffled()], state)
    assert state.round_id == 3 and state.deck.round_deck == "D2"


# --- issue 27: the age at the deal, a questioned stub count, the idle procedure -----------


def _aged_mid_round(rules: TableRules) -> TableState:
    """Round 1 opened on D1 before its limit; the limit passes while bets are taken."""
    state, _ = run(
        rules, [*shuffled(), ChipSensed(seat=2, present=True, since_ns=1)], introduced(rules)
    )
    assert state.phase is Phase.BETTING and state.deck.round_deck == "D1"
    state, fx = step(rules, state, DeckClock(at_ms=T0 + 8 * HOUR))
    assert [e.deck_id for e in records(fx, rec.DeckAgeExpired)] == ["D1", "D2"]
    return state


def test_a_round_opened_before_its_decks_limit_is_not_dealt_after_it() -> None:
    """649a.3(c)(2): the age is asked again when the shoe's deal starts. The round waits for
    a new deck (then it is dealt from it) or is voided under the same section."""
    rules = with_decks(tcp(), shoe=True)
    state = _aged_mid_round(rules)
    state, _ = run(rules, [LockoutPressed(at_ns=10)], state)
    held, fx = step(rules, state, DealRequested(by="d1"))
    (hold,) = records(fx, rec.DeckAgeHold)
    assert hold.deck_id == "D1" and hold.rule == "649a.3(c)(2)" and hold.round_id == 1
    assert "void deck-age" in hold.action and not [f for f in fx if type(f).__name__ == "DealCards"]
    assert held.deal is None
    with pytest.raises(Rejected, match=r"reached its age limit \(649a\.3\(c\)\(2\)\)"):
        step(rules, held, DealRequested(by="d1"))
    assert rules.deck is not None
    (aged,) = [
        f.cause
        for f in deck_faults(rules.deck, rules.game.table_game(), held, T0 + 8 * HOUR)
        if "deck D1" in f.cause
    ]
    assert "round 1 opened on it before its limit and is not dealt from it" in aged
    # Voided with its section...
    _, fx = step(rules, held, VoidRound(reason="deck-age", by="d1"))
    (void,) = records(fx, rec.RoundVoided)
    assert void.rule == "649a.3(c)(2)" and void.wagers_returned == [2]
    # ... or dealt from the new deck that replaces it.
    replaced, _ = step(
        rules, held, DeckIntroduced(deck_id="D3", back="green", at_ms=T0 + 8 * HOUR, replaces="D1")
    )
    _, fx = step(rules, replaced, DealRequested(by="d1"))
    assert [f for f in fx if type(f).__name__ == "DealCards"] and not records(fx, rec.DeckAgeHold)


def test_dealt_by_hand_no_more_bets_is_the_deal_and_the_round_is_not_settled_on_the_old_deck() -> (
    None
):
    base = tcp()
    game = base.game.model_copy(update={"dealing": "hand"})
    rules = with_decks(base.model_copy(update={"game": game}), max_age_ms=4 * HOUR)
    state, _ = run(
        rules, [*shuffled(), ChipSensed(seat=2, present=True, since_ns=1)], introduced(rules)
    )
    state, _ = step(rules, state, DeckClock(at_ms=T0 + 4 * HOUR))
    state, fx = step(rules, state, LockoutPressed(at_ns=10, resting_seats=(2,)))
    (hold,) = records(fx, rec.DeckAgeHold)
    assert hold.rule == "649a.3(c)(1)"
    with pytest.raises(Rejected, match="void the round"):
        step(rules, state, Settle(folded=frozenset({2}), by="d1"))
    state, fx = step(rules, state, VoidRound(reason="deck-age", by="d1"))
    assert records(fx, rec.RoundVoided)[0].reason == "deck-age"


def test_revision_3_journals_deal_and_settle_as_they_were_written() -> None:
    rules = with_decks(tcp(), shoe=True).model_copy(update={"revision": 3})
    state = _aged_mid_round(rules)
    state, _ = run(rules, [LockoutPressed(at_ns=10)], state)
    _, fx = step(rules, state, DealRequested(by="d1"))
    assert not records(fx, rec.DeckAgeHold) and [f for f in fx if type(f).__name__ == "DealCards"]
    with pytest.raises(Rejected, match="unknown void reason 'deck-age'"):
        step(rules, state, VoidRound(reason="deck-age", by="d1"))


def test_a_stub_count_the_shoes_reads_contradict_is_questioned_until_the_dealer_confirms() -> None:
    """The shoe read 6 cards of this deck: a whole deck leaves a stub of 46. A count of 50 is
    shown against it and nothing is decided until the dealer says which count stands."""
    rules = with_decks(tcp(), alternate=False, every=5, shoe=True)
    state, _ = run(rules, locked(2), introduced(rules))
    state, _ = shoe_round(state, rules, "red")
    asked, fx = step(rules, state, StubCounted(cards=50, by="d1"))
    (question,) = records(fx, rec.StubCountQuestioned)
    assert (
        question.counted,
        question.cards_read,
        question.stub_counted,
        question.stub_expected,
    ) == (50, 6, 44, 46)
    assert not records(fx, rec.StubCountRecord) and asked.phase is Phase.LOCKED
    assert rules.deck is not None
    shown = {f.what: f for f in deck_faults(rules.deck, rules.game.table_game(), asked, T0)}
    questioned = shown["stub-count-questioned"]
    assert "holds 50 cards (a stub of 44 after the 6 cards the shoe read" in questioned.cause
    assert "leave a stub of 46" in questioned.cause
    assert questioned.command == "tablectl dealer stub-count 50 --confirm --by ID"
    with pytest.raises(Rejected, match="questioned already"):
        step(rules, asked, StubCounted(cards=50, by="d1"))
    # The shoe's count confirmed: the deck is whole.
    whole, fx = step(rules, asked, StubCounted(by="d1"))
    assert records(fx, rec.StubCountRecord)[0].outcome == "correct"
    assert whole.deck.stub_questioned is None
    # The dealer's count confirmed: not misdealt, so the deck leaves and the round is void.
    removed, fx = step(rules, asked, StubCounted(cards=50, confirmed=True, by="d1"))
    assert records(fx, rec.StubCountRecord)[0].outcome == "deck-removed"
    assert records(fx, rec.RoundVoided) and removed.blocked == "stub-count:50"


def test_an_idle_table_asks_for_the_idle_procedure_and_refuses_the_next_round_until_done() -> None:
    """649a.5(f): "If there is no gaming activity at a Three Card Poker table which is open for
    gaming, the cards shall be removed from the dealing shoe and discard rack and spread out
    on the table face down ..." A round open without a wager is closed; no round opens until
    the dealer confirms the procedure; the deck from the table is shuffled and counted."""
    rules = with_decks(tcp()).model_copy(
        update={"deck": DeckRules(max_age_ms=8 * HOUR, alternate=True, idle_ms=30 * MIN)}
    )
    state, _ = run(rules, [*shuffled(), *shuffled()], introduced(rules))
    assert state.phase is Phase.BETTING and state.round_id == 1 and state.deck_ready
    soon, fx = step(rules, state, TableIdle(since_ms=T0, at_ms=T0 + 29 * MIN))
    assert fx == [] and soon.deck.idle_due_ms is None  # not yet
    idle, fx = step(rules, state, TableIdle(since_ms=T0, at_ms=T0 + 30 * MIN))
    (due,) = records(fx, rec.IdleProcedureDue)
    assert due.rule == "649a.5(f)" and due.round_voided == 1 and due.idle_ms == 30 * MIN
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.reason == "table-idle" and voided.wagers_returned == [] and voided.by == "table"
    assert idle.phase is Phase.CLOSED and idle.deck_ready  # shuffled, but held
    assert rules.deck is not None
    shown = {f.what: f for f in deck_faults(rules.deck, rules.game.table_game(), idle, T0)}
    procedure = shown["idle-procedure"]
    assert (
        procedure.command == "tablectl dealer idle-procedure --by ID"
        and procedure.rule == "649a.5(f)"
    )
    assert "remove the deck that was in it" in procedure.remedy
    with pytest.raises(Rejected, match="no idle procedure is due"):
        step(rules, state, IdleProcedureDone(by="d1"))
    done, fx = step(rules, idle, IdleProcedureDone(by="d1"))
    assert records(fx, rec.IdleProcedureDoneRecord)[0].by == "d1"
    assert done.phase is Phase.CLOSED and not done.deck_ready  # the table's deck: shuffled first
    done, _ = run(rules, shuffled(), done)
    assert done.phase is Phase.BETTING and done.round_id == 2


def test_wagers_on_the_layout_or_a_round_under_way_are_not_idle() -> None:
    rules = with_decks(tcp()).model_copy(
        update={"deck": DeckRules(max_age_ms=8 * HOUR, alternate=True, idle_ms=30 * MIN)}
    )
    state, _ = run(
        rules, [*shuffled(), ChipSensed(seat=3, present=True, since_ns=1)], introduced(rules)
    )
    later_on = TableIdle(since_ms=T0, at_ms=T0 + HOUR)
    assert step(rules, state, later_on) == (
        state.replace(deck=state.deck.replace(now_ms=T0 + HOUR)),
        [],
    )
    locked_state, _ = run(rules, [LockoutPressed(at_ns=10)], state)
    assert step(rules, locked_state, later_on)[1] == []
    old = rules.model_copy(update={"revision": 3})
    assert step(old, state, later_on) == (state, [])
