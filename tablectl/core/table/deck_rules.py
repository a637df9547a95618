"""The decks a table keeps (649a.3, 649a.5, 649a.8-.10): identity, alternation, age, stub
counts, the idle procedure, the backs the shoe reads, a deck not of 52 distinct cards. Pure.

What a deck is and how it ages is the model's (core/decks.py); this room applies it to the
table's state: the inputs about decks (`deck_input`), what the opening of a round and the
deal ask of the decks, and the irregularities that remove a deck from the table.
"""

from __future__ import annotations

from tablectl.core import decks
from tablectl.core import effects as rec
from tablectl.core.decks import DeckLife
from tablectl.core.effects import Effect
from tablectl.core.events import (
    DeckClock,
    DeckInPlay,
    DeckIntroduced,
    DeckRules,
    IdleProcedureDone,
    NewDeckRegistered,
    ShoeCard,
    ShoeDealCompleted,
    ShoeStackDealt,
    StubCounted,
    TableIdle,
    TableRules,
)
from tablectl.core.games.base import DECK_SIZE, TableGame
from tablectl.core.table.state import (
    Context,
    Phase,
    Rejected,
    TableState,
    dealing,
    decks_kept,
    decks_kept_since_4,
    shoe_rule,
    unverify,
    with_life,
)
from tablectl.core.table.void import void_round
from tablectl.util.frozen import trusted


def new_deck(event: NewDeckRegistered, s: TableState, ctx: Context) -> TableState:
    """A new deck registered in place of one removed, at a table that does not keep decks."""
    if decks_kept(ctx.rules) is not None:
        raise Rejected(
            "this table keeps its decks: introduce the new one with its id and back "
            "colour (`tablectl dealer new-deck --id ID --back COLOUR`)"
        )
    if s.blocked is None:
        raise Rejected("no deck is waiting to be replaced")
    ctx.fx.append(trusted(rec.DeckRegistered, replaces=s.blocked, by=event.by))
    # 649a.5(b): the new deck is played only once the shuffler has counted it.
    return unverify(s.replace(blocked=None))


def deck_too_old(rules: TableRules, s: TableState) -> decks.DeckEntry | None:
    """The deck in play past its age, under revision 4 on (649a.3(c)); None: young enough."""
    return None if decks_kept_since_4(rules) is None else decks.too_old_to_deal(s.deck)


def deck_age_at_deal(
    rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]
) -> TableState:
    """The deal starts: a round opened before its deck's limit is not dealt after it
    (649a.3(c)). Journaled once per round; the round waits for a new deck (one introduced in
    place of it) or is void (`dealer void deck-age`)."""
    deck_rules = decks_kept_since_4(rules)
    old = deck_too_old(rules, s)
    if deck_rules is None or old is None or s.deck.age_held_round == s.round_id:
        return s
    rule = decks.age_rule(game)
    fx.append(
        trusted(
            rec.DeckAgeHold,
            round_id=s.round_id,
            deck_id=old.deck_id,
            age_ms=old.age_ms(s.deck.now_ms),
            max_age_ms=deck_rules.max_age_ms,
            rule=rule,
            action=f"not dealt from deck {old.deck_id}: introduce the deck that replaces it "
            f"(tablectl dealer new-deck --id ID --back COLOUR --replaces {old.deck_id}) and "
            "deal from it, or void the round (tablectl dealer void deck-age)",
        )
    )
    return with_life(s, s.deck.replace(age_held_round=s.round_id))


def deck_block(rules: TableRules, s: TableState) -> decks.DeckBlock | None:
    """What holds the next round about the decks (core/decks.py), or None."""
    deck_rules = decks_kept(rules)
    return None if deck_rules is None else decks.block(deck_rules, s.deck)


def deck_asks(rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]) -> TableState:
    """Between rounds, a stub count that fell due is asked for, once (649a.8(f) ...)."""
    deck_rules = decks_kept(rules)
    life = s.deck
    if deck_rules is None or s.phase is not Phase.CLOSED or life.stub_count_asked:
        return s
    if not decks.stub_count_due(deck_rules, life):
        return s
    fx.append(
        trusted(
            rec.StubCountDue,
            round_id=s.round_id,
            rounds=life.rounds_since_stub_count,
            rule=decks.stub_rules(game)[0],
        )
    )
    return with_life(s, life.replace(stub_count_asked=True))


def deck_round_opened(rules: TableRules, s: TableState) -> TableState:
    """A round opens on the deck due (649a.3(b)(3)), and counts toward the stub count."""
    deck_rules = decks_kept(rules)
    if deck_rules is None:
        return s
    life = s.deck
    due = life.next_deck(deck_rules)
    counting = deck_rules.stub_count_every_rounds is not None
    return with_life(
        s,
        life.replace(
            previous_round_deck=life.round_deck,
            round_deck=None if due is None else due.deck_id,
            rounds_since_stub_count=life.rounds_since_stub_count + int(counting),
            shoe_read=None,
        ),
    )


def deck_input(
    event: DeckIntroduced | DeckClock | DeckInPlay | StubCounted | TableIdle | IdleProcedureDone,
    s: TableState,
    ctx: Context,
) -> TableState:
    """A deck's input, at a table that keeps its decks (under the rules' revision)."""
    rules, game, fx = ctx.rules, ctx.game, ctx.fx
    deck_rules = decks_kept(rules)
    if deck_rules is None or (
        isinstance(event, TableIdle | IdleProcedureDone) and decks_kept_since_4(rules) is None
    ):
        if isinstance(event, DeckClock | TableIdle):
            return s  # nothing ages at a table that keeps no decks
        raise Rejected(
            f"this table keeps no decks: its config has no [deck] section ({decks.chapter(game)}.3)"
        )
    match event:
        case DeckClock(at_ms=at_ms):
            return _deck_ages(game, deck_rules, _deck_time(s, at_ms), fx)
        case DeckIntroduced():
            return _deck_ages(game, deck_rules, _introduce(game, deck_rules, s, event, fx), fx)
        case DeckInPlay():
            return _deck_in_play(game, deck_rules, s, event, fx)
        case StubCounted():
            return _stub_counted(rules, game, deck_rules, s, event, fx)
        case TableIdle():
            return _table_idle(game, deck_rules, _deck_time(s, event.at_ms), event, fx)
        case IdleProcedureDone():
            return _idle_procedure_done(game, s, event, fx)


def _table_idle(
    game: TableGame, rules: DeckRules, s: TableState, event: TableIdle, fx: list[Effect]
) -> TableState:
    """649a.5(f): "If there is no gaming activity at a Three Card Poker table which is open
    for gaming, the cards shall be removed from the dealing shoe and discard rack and spread
    out on the table face down..." No round locked for the table's idle time: the procedure
    is due before the next round; a round open without a wager is closed (void)."""
    life = s.deck
    idle_ms = rules.idle_ms
    if idle_ms is None or life.idle_due_ms is not None:
        return s
    if s.phase is Phase.LOCKED or s.wagers or s.undecided:
        return s  # a round under way, or wagers on the layout: the table is not idle
    if event.at_ms - event.since_ms < idle_ms:
        return s
    rule = decks.idle_rule(game)
    betting = s.phase is Phase.BETTING
    fx.append(
        trusted(
            rec.IdleProcedureDue,
            since_ms=event.since_ms,
            idle_ms=idle_ms,
            round_voided=s.round_id if betting else None,
            rule=rule,
            action="spread the cards for inspection, then place the deck from the table in "
            "the shuffler and remove the one in it: tablectl dealer idle-procedure --by ID",
        )
    )
    s = with_life(s, life.replace(idle_due_ms=event.at_ms))
    if betting:
        # Nobody has wagered on it: it is not played on cards that sat uninspected.
        s = void_round(s, "table-idle", rule, "table", fx)
    return s


def _idle_procedure_done(
    game: TableGame, s: TableState, event: IdleProcedureDone, fx: list[Effect]
) -> TableState:
    """The dealer did the idle procedure: the deck from the table goes into the shuffler and
    is shuffled and counted before a round opens (649a.5(b), 649a.5(f)(2) of the 2011 text)."""
    if s.deck.idle_due_ms is None:
        raise Rejected("no idle procedure is due: the table has had rounds")
    fx.append(trusted(rec.IdleProcedureDoneRecord, rule=decks.idle_rule(game), by=event.by))
    s = with_life(s, s.deck.replace(idle_due_ms=None))
    return unverify(s) if s.phase is Phase.CLOSED else s


def _deck_time(s: TableState, at_ms: int) -> TableState:
    """The latest time heard; a clock set back never makes a deck younger."""
    now = at_ms if s.deck.now_ms is None else max(s.deck.now_ms, at_ms)
    return with_life(s, s.deck.replace(now_ms=now))


def _deck_ages(game: TableGame, rules: DeckRules, s: TableState, fx: list[Effect]) -> TableState:
    """649a.3(c): a warning warn_before_ms ahead of a deck's limit; at the limit the deck
    holds the next round until it is replaced. Each journaled once."""
    life = s.deck
    rule = decks.age_rule(game)
    for deck in life.decks:
        age = deck.age_ms(life.now_ms)
        if not deck.warned and age >= rules.max_age_ms - rules.warn_before_ms:
            fx.append(
                trusted(
                    rec.DeckAgeWarning,
                    deck_id=deck.deck_id,
                    age_ms=age,
                    max_age_ms=rules.max_age_ms,
                    rule=rule,
                )
            )
            deck = deck.replace(warned=True)
        if not deck.expired and age >= rules.max_age_ms:
            fx.append(
                trusted(
                    rec.DeckAgeExpired,
                    deck_id=deck.deck_id,
                    age_ms=age,
                    max_age_ms=rules.max_age_ms,
                    rule=rule,
                    action=f"no round opens until it is replaced: tablectl dealer new-deck "
                    f"--id ID --back COLOUR --replaces {deck.deck_id}",
                )
            )
            deck = deck.replace(expired=True)
        life = life.with_deck(deck)
    return with_life(s, life)


def _introduce(
    game: TableGame, rules: DeckRules, s: TableState, event: DeckIntroduced, fx: list[Effect]
) -> TableState:
    """A deck comes to the table; it replaces the one named, or the one removed or past its
    age, or joins the decks the table plays with."""
    life = _deck_time(s, event.at_ms).deck
    if life.find(event.deck_id) is not None:
        raise Rejected(f"deck {event.deck_id} is already at the table: give the new deck's id")
    replaced = _replaced(rules, s, life, event)
    staying = [d for d in life.decks if d.deck_id != replaced]
    if rules.alternate and any(d.back == event.back for d in staying):
        # 649a.3(b)(1): the backs of one deck are of a different colour than the other's.
        raise Rejected(
            f"deck {staying[0].deck_id} has {event.back} backs too: the two decks' backs "
            f"differ in colour ({decks.chapter(game)}.3(b)(1))"
        )
    new = decks.DeckEntry(deck_id=event.deck_id, back=event.back, introduced_ms=event.at_ms)
    fx.append(
        trusted(
            rec.DeckIntroducedRecord,
            deck_id=event.deck_id,
            back=event.back,
            at_ms=event.at_ms,
            max_age_ms=rules.max_age_ms,
            replaces=replaced,
            source=event.source,
            by=event.by,
            rule=f"{decks.chapter(game)}.3",
        )
    )

    def renamed(deck_id: str | None) -> str | None:
        return event.deck_id if deck_id is not None and deck_id == replaced else deck_id

    life = life.replace(
        decks=(*staying, new),
        round_deck=renamed(life.round_deck),
        previous_round_deck=renamed(life.previous_round_deck),
    )
    s = with_life(s, life)
    if s.blocked is not None:
        fx.append(trusted(rec.DeckRegistered, replaces=s.blocked, by=event.by))
        s = s.replace(blocked=None)
    if s.phase is Phase.CLOSED:
        # 649a.5(b): a deck is played only once the shuffler has counted it.
        s = unverify(s)
    return s


def _replaced(rules: DeckRules, s: TableState, life: DeckLife, event: DeckIntroduced) -> str | None:
    if event.replaces is not None:
        if life.find(event.replaces) is None:
            raise Rejected(
                f"deck {event.replaces} is not at the table; decks: "
                f"{', '.join(d.deck_id for d in life.decks) or 'none'}"
            )
        return event.replaces
    if len(life.decks) < decks.decks_needed(rules):
        return None
    expired = [d.deck_id for d in life.decks if d.age_ms(life.now_ms) >= rules.max_age_ms]
    if expired:
        return expired[0]
    if s.blocked is not None:
        # The deck removed: the one just counted by the shuffler, or the one in play.
        due = life.next_deck(rules)
        if s.blocked.startswith("deck-miscount") and due is not None:
            return due.deck_id
        if life.round_deck is not None:
            return life.round_deck
    raise Rejected(
        f"the table plays {decks.decks_needed(rules)} deck(s) "
        f"({', '.join(d.deck_id for d in life.decks)}): name the one this deck replaces "
        "(--replaces ID)"
    )


def _deck_in_play(
    game: TableGame, rules: DeckRules, s: TableState, event: DeckInPlay, fx: list[Effect]
) -> TableState:
    """The dealer names the deck the round is dealt from: the deck that played the previous
    round is refused (649a.3(b)(3): each deck is used for every other round)."""
    if s.phase is Phase.CLOSED:
        raise Rejected("no round in play: name its deck once betting has opened")
    life = s.deck
    if life.find(event.deck_id) is None:
        decks_here = ", ".join(d.deck_id for d in life.decks) or "none"
        raise Rejected(f"deck {event.deck_id} is not at the table; decks: {decks_here}")
    if rules.alternate and event.deck_id == life.previous_round_deck and event.source == "shuffler":
        # The shuffler delivered the deck that played the previous round: this round is not
        # played on it (649a.3(b)(3)); its wagers are returned and the decks go on alternating.
        rule = decks.alternation_rule(game)
        fx.append(
            trusted(
                rec.DeckAlternation,
                round_id=s.round_id,
                deck_id=event.deck_id,
                previous_round_deck=event.deck_id,
                round_voided=True,
                rule=rule,
            )
        )
        s = void_round(s, "deck-alternation", rule, "shuffler", fx)
        return with_life(s, s.deck.replace(round_deck=event.deck_id))
    if rules.alternate and event.deck_id == life.previous_round_deck:
        raise Rejected(
            f"deck {event.deck_id} played the previous round: the decks alternate, each used "
            f"for every other round ({decks.alternation_rule(game)}); deal round {s.round_id} "
            f"from deck {life.round_deck}"
        )
    if event.deck_id != life.round_deck:
        return with_life(s, life.replace(round_deck=event.deck_id))
    return s


def shoe_back(
    rules: TableRules,
    game: TableGame,
    s: TableState,
    event: ShoeCard | ShoeStackDealt | ShoeDealCompleted,
    fx: list[Effect],
) -> TableState | None:
    """A card whose back the shoe reports: of the deck in play, or the round stops. The other
    deck's back: the deck that played the previous round (649a.3(b)(3)), the round void. A
    back of no deck at the table: a foreign card, the deck removed (649a.10(f))."""
    deck_rules = decks_kept(rules)
    if deck_rules is None or not isinstance(event, ShoeCard) or event.back is None:
        return None
    if not dealing(s):
        return None
    life = s.deck
    in_play = life.find(life.round_deck)
    if in_play is not None and in_play.back == event.back:
        return None
    other = life.by_back(event.back)
    if other is not None and deck_rules.alternate:
        rule = decks.alternation_rule(game)
        fx.append(
            trusted(
                rec.DeckAlternation,
                round_id=s.round_id,
                deck_id=other.deck_id,
                previous_round_deck=life.previous_round_deck or other.deck_id,
                round_voided=True,
                rule=rule,
            )
        )
        return void_round(s, "deck-alternation", rule, "shoe", fx)
    return deck_irregular(game, s, "foreign-back", fx)


def shoe_read(rules: TableRules, s: TableState) -> TableState:
    """The cards the shoe read this round: a stub count can be derived from them."""
    if decks_kept(rules) is None or s.deal is None or not s.deal.complete:
        return s
    if s.deck.shoe_read == len(s.deal.cards):
        return s
    return with_life(s, s.deck.replace(shoe_read=len(s.deal.cards)))


def _stub_counted(
    table_rules: TableRules,
    game: TableGame,
    rules: DeckRules,
    s: TableState,
    event: StubCounted,
    fx: list[Effect],
) -> TableState:
    """649a.8(g)-(h), 649a.9(e)-(f), 649a.10(e)-(f) (653a.8(g)-(h), 653a.9(e)-(f),
    653a.10(e)-(f); 643a the same): 52, the stub goes to the discard rack; otherwise all hands
    are void and the wagers returned, and unless the cards were misdealt the deck leaves."""
    every_rule, whole_rule, wrong_rule = decks.stub_rules(game)
    if rules.stub_count_every_rounds is None:
        raise Rejected(
            "the shuffler counts every deck after its shuffle (649a.5(b)): no stub count is "
            f"kept ({every_rule}); set deck.stub_count_every_rounds where it does not"
        )
    if s.phase is Phase.BETTING:
        raise Rejected(f"round {s.round_id} is taking bets: the stub is counted after the deal")
    if s.phase is Phase.LOCKED and not s.counted:
        raise Rejected(f"the count is not final: seats {list(s.undecided)} are still resting")
    life = s.deck
    derived = event.cards is None
    if event.cards is None and life.shoe_read is None:
        raise Rejected(
            "no shoe read this round's cards: count the stub and give the deck's count "
            "(`tablectl dealer stub-count 52`)"
        )
    cards = DECK_SIZE if event.cards is None else event.cards
    in_play = s.phase is Phase.LOCKED
    read = life.shoe_read
    if (
        decks_kept_since_4(table_rules) is not None
        and read is not None
        and cards != DECK_SIZE
        and not event.confirmed
    ):
        # The shoe read `read` distinct cards of this deck: a whole deck leaves a stub of
        # 52 - read. A count that says otherwise is asked again, both shown; the dealer
        # confirms theirs (--confirm) or the shoe's (no count).
        if life.stub_questioned == cards:
            raise Rejected(
                f"your count of {cards} is questioned already: the shoe read {read} cards, a "
                f"whole deck leaves a stub of {DECK_SIZE - read}; confirm yours with "
                f"`tablectl dealer stub-count {cards} --confirm`, or the shoe's with "
                "`tablectl dealer stub-count`"
            )
        fx.append(
            trusted(
                rec.StubCountQuestioned,
                round_id=s.round_id,
                deck_id=life.round_deck,
                counted=cards,
                cards_read=read,
                stub_counted=cards - read,
                stub_expected=DECK_SIZE - read,
                rule=every_rule,
                by=event.by,
            )
        )
        return with_life(s, life.replace(stub_questioned=cards))

    def record(outcome: str, rule: str) -> None:
        fx.append(
            trusted(
                rec.StubCountRecord,
                round_id=s.round_id,
                deck_id=life.round_deck,
                cards=cards,
                derived_from_shoe=derived,
                misdealt=event.misdealt,
                outcome=outcome,
                rule=rule,
                by=event.by,
            )
        )

    counted = life.replace(rounds_since_stub_count=0, stub_count_asked=False, stub_questioned=None)
    if cards == DECK_SIZE:
        if event.misdealt:
            raise Rejected(
                f"the count shows {DECK_SIZE} cards: the deck is whole ({whole_rule}); a hand "
                "dealt the wrong number of cards is voided with `tablectl dealer void "
                f"wrong-card-count` ({decks.chapter(game)}.13(c))"
            )
        record("correct", whole_rule)
        return with_life(s, counted)
    if event.misdealt:
        if not in_play:
            raise Rejected(
                f"round {s.round_id} is settled: a misdeal is judged with the hands on the "
                f"layout ({wrong_rule}); without one, the count removes the deck"
            )
        record("misdealt-void", wrong_rule)
        return void_round(with_life(s, counted), "stub-count-misdeal", wrong_rule, event.by, fx)
    record("deck-removed", wrong_rule)
    removed = counted.replace(decks=tuple(d for d in counted.decks if d.deck_id != life.round_deck))
    s = unverify(with_life(s, removed)).replace(
        blocked=f"stub-count:{cards}", counters=s.counters.bump("deck_irregular")
    )
    if not in_play:
        return s
    return void_round(s, "stub-count", wrong_rule, event.by, fx)


def deck_irregular(
    game: TableGame, s: TableState, reason: str, fx: list[Effect], *, by: str = "shoe"
) -> TableState:
    """Not 52 distinct cards (a count of 52 cannot see a duplicate): the deck leaves the table
    and all hands are void (649a.10(f), 653a.10(f), 643a.10(f))."""
    rule = shoe_rule(game, "deck")
    fx.append(
        trusted(
            rec.DeckIrregular,
            round_id=s.round_id,
            reason=reason,
            rule=rule,
            action="deck removed; register a new deck",
        )
    )
    s = unverify(s).replace(
        blocked=f"deck-irregular:{reason}", counters=s.counters.bump("deck_irregular")
    )
    if s.phase is Phase.CLOSED:
        return s  # no round is played on it
    return void_round(s, reason, rule, by, fx)
