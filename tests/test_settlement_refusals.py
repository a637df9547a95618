"""Settlement never drops a wager: a round the text forbids is refused with an error naming
the section, and any other round settles every wager placed, each exactly once.

Random rounds, many malformed (seats outside the table or given twice, wagers without the
wager the text requires before them, negative amounts, wagers the table does not offer,
hands of the wrong size, a card twice), are checked against this file's own reading of the
text: the rounds it finds well formed must settle with one result per wager (every wager
in, one result out); the others must raise SettlementRefused citing a section."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tablectl.config import load_config
from tablectl.core.games.base import RoundCards, TableSettlement
from tablectl.rules.cards import Card, full_deck, parse_cards
from tablectl.rules.meters import LocalMeter
from tablectl.rules.paytables import operator_paytable
from tablectl.rules.settlement import (
    LirRules,
    LirSeat,
    Settlement,
    SettlementRefused,
    TcpRules,
    TcpSeat,
    UthRules,
    UthSeat,
    settle_let_it_ride,
    settle_three_card_poker,
    settle_ultimate_texas_holdem,
)

from .conftest import REPO

C = parse_cards
SECTION = re.compile(r"\b6(43|49|53)a\.\d+")
UTH_BONUS = operator_paytable(
    "ultimate-texas-holdem", "bonus", "Rules Submission", {"three-of-a-kind": "5 to 1"}
)

Cards = tuple[Card, ...]
TcpRound = tuple[TcpRules, list[TcpSeat], Cards, LocalMeter | None]
UthRound = tuple[UthRules, list[UthSeat], Cards, Cards, LocalMeter | None]
LirRound = tuple[LirRules, list[LirSeat], Cards]


FAULT = st.sampled_from([0] * 8 + [1, 2])  # a hand dealt wrong, one time in five
AMOUNTS = st.sampled_from([0, 0, 100, 500, 200, -100, -1])
CLEAN_AMOUNTS = st.sampled_from([0, 0, 100, 500])


GAMES = {
    name: load_config(REPO / "config" / f"{name}.toml")
    for name in ("three-card-poker", "ultimate-texas-holdem", "let-it-ride")
}
HAND_SIZE = {"three-card-poker": 3, "ultimate-texas-holdem": 2, "let-it-ride": 3}
DEALER_SIZE = {"three-card-poker": 3, "ultimate-texas-holdem": 2, "let-it-ride": 0}
COMMUNITY_SIZE = {"three-card-poker": 0, "ultimate-texas-holdem": 5, "let-it-ride": 2}
GameRound = tuple[dict[int, int], RoundCards, frozenset[int]]


@dataclass
class Dealer:
    """Draws one round, clean or careless. A clean round has hands of the right size from one
    deck, each player at a seat of the table once, every amount 0 or more, and the wager
    every player must place first (it may still hold a wager the table does not offer, or no
    meter); a careless one may have anything."""

    draw: st.DrawFn
    seats: int

    def __post_init__(self) -> None:
        self.clean = self.draw(st.booleans())
        self.cards = list(full_deck())
        self.draw(st.randoms(use_true_random=False)).shuffle(self.cards)
        self.free = list(range(1, self.seats + 1))

    def players(self) -> int:
        return self.draw(st.integers(0, min(5, self.seats) if self.clean else 5))

    def hand(self, n: int) -> Cards:
        hand = tuple(self.cards.pop() for _ in range(n))
        fault = 0 if self.clean else self.draw(FAULT)
        if fault == 1:  # a card short
            return hand[1:]
        if fault == 2:  # its first card again instead of its last
            return (*hand[:-1], hand[0])
        return hand

    def seat(self) -> int:
        if self.clean:
            seat = self.draw(st.sampled_from(self.free))
            self.free.remove(seat)
            return seat
        return self.draw(st.one_of(st.integers(1, self.seats), st.integers(-1, 9)))

    def amount(self, *, required: bool = False) -> int:
        if self.clean and required:
            return self.draw(st.sampled_from([100, 500, 200]))
        return self.draw(CLEAN_AMOUNTS if self.clean else AMOUNTS)


def placed(s: Settlement) -> list[tuple[int, str, int]]:
    """Each wager's result (a bonus paid on the Ante is no wager of its own)."""
    return sorted((r.seat, r.wager, r.wager_cents) for r in s.results if r.wager != "ante-bonus")


def settles_every_wager(
    settle: Callable[[], Settlement], wagers: list[tuple[int, str, int]], well_formed: bool
) -> None:
    try:
        outcome: Settlement | SettlementRefused = settle()
    except SettlementRefused as exc:
        outcome = exc
    event("settled" if isinstance(outcome, Settlement) else "refused")
    if isinstance(outcome, SettlementRefused):
        assert SECTION.search(str(outcome)), f"no section named: {outcome}"
        assert not well_formed, f"a well-formed round was refused: {outcome}"
        return
    assert well_formed, f"a malformed round was settled: {wagers}"
    assert placed(outcome) == sorted(wagers)  # every wager in, one result out
    for r in outcome.results:
        assert r.paid_cents >= 0 and r.net_cents == r.paid_cents - r.wager_cents, r


def seats_once(numbers: Sequence[int], seats: int) -> bool:
    return len(set(numbers)) == len(numbers) and all(1 <= n <= seats for n in numbers)


# --- what is refused, and the section each refusal names ------------------------------

TCP = TcpRules(seats=6, progressive="A", six_card_bonus="A")
UTH = UthRules(seats=6, progressive=True, bad_beat=UTH_BONUS, six_card_bonus=UTH_BONUS)
LIR = LirRules(seats=7, bonus="A", three_card_bonus="A")
METER = LocalMeter(cents=250_000)
ROYAL = C("AsKsQs")  # a mini-royal: 100 % of the meter on paytable A (649a.12(e)(1))


def tcp(*players: TcpSeat) -> Callable[[], Settlement]:
    return lambda: settle_three_card_poker(TCP, players, C("2c7d9h"), METER)


def uth(*players: UthSeat) -> Callable[[], Settlement]:
    return lambda: settle_ultimate_texas_holdem(UTH, players, C("3c8d4h5s9c"), C("2d2h"), METER)


def lir(*players: LirSeat) -> Callable[[], Settlement]:
    return lambda: settle_let_it_ride(LIR, players, C("3c8d"))


@pytest.mark.parametrize(
    ("settle", "message"),
    [
        # A seat that is not one of the table's: its 100 % hit would have vanished.
        (tcp(TcpSeat(0, ROYAL, ante=100, play=True, progressive=100)), r"seat 0: .*649a\.2\(a\)"),
        (tcp(TcpSeat(7, ROYAL, pair_plus=100)), r"seat 7: the table has betting positions 1 to 6"),
        (uth(UthSeat(9, C("AcKc"), ante=100)), r"seat 9: .*653a\.2\(a\)"),
        (lir(LirSeat(-1, C("AcKcQc"), bet=100)), r"seat -1: .*643a\.11\(f\)"),
        # One seat twice: the first entry's wagers would have had no result.
        (
            tcp(TcpSeat(3, ROYAL, pair_plus=100), TcpSeat(3, C("4c5c6c"), ante=100)),
            r"seat 3 is given twice.*649a\.11\(c\)",
        ),
        (
            uth(UthSeat(2, C("AcKc"), ante=100), UthSeat(2, C("AdKd"), ante=100)),
            r"seat 2 is given twice.*653a\.11\(h\)",
        ),
        (
            lir(LirSeat(5, C("AcKcQc"), bet=100), LirSeat(5, C("AdKdQd"), bet=100)),
            r"seat 5 is given twice.*643a\.11\(f\)",
        ),
        # A wager without the one the text requires before it.
        (
            tcp(TcpSeat(1, ROYAL, progressive=100)),
            r"progressive wager without an Ante or Pair Plus.*\(649a\.7\(d\)\(4\)\)",
        ),
        (
            tcp(TcpSeat(1, ROYAL, six_card_bonus=100)),
            r"six-card-bonus wager without .*\(649a\.7\(d\)\(5\)\)",
        ),
        (
            tcp(TcpSeat(1, ROYAL, play=True, pair_plus=100)),
            r"Play Wager without an Ante .*\(649a\.7\(d\)\(1\)\)",
        ),
        (tcp(TcpSeat(1, ROYAL)), r"no wager placed.*\(649a\.8\(d\), 649a\.10\(b\)\)"),
        (
            uth(UthSeat(1, C("AcKc"), ante=0, trips=100)),
            r"trips wager without an Ante.*\(653a\.7\(d\)\(2\)\)",
        ),
        (uth(UthSeat(1, C("AcKc"), ante=0, progressive=100)), r"\(653a\.7\(d\)\(3\)\)"),
        (
            uth(UthSeat(1, C("AcKc"), ante=0, bad_beat=100)),
            r"bad-beat wager without an Ante.*653a\.10\(b\)",
        ),
        (
            uth(UthSeat(1, C("AcKc"), ante=0, play_multiple=4)),
            r"no Ante and Blind.*\(653a\.7\(d\)\(1\)\)",
        ),
        (
            lir(LirSeat(1, C("AcKcQc"), bet=0, bonus=100)),
            r"its bonus wager has no hand.*\(643a\.8\(d\)\)",
        ),
        # Amounts: never negative; a required wager of nothing is no wager.
        (
            tcp(TcpSeat(1, ROYAL, ante=100, play=True, pair_plus=-500)),
            r"pair-plus wager of -\$5\.00.*\(649a\.7\(a\)\)",
        ),
        (
            uth(UthSeat(1, C("AcKc"), ante=-100, play_multiple=1)),
            r"ante wager of -\$1\.00.*\(653a\.7\(a\)\)",
        ),
        (lir(LirSeat(1, C("AcKcQc"), bet=100, three_card_bonus=-1)), r"643a\.7\(d\)-\(f\)"),
        (lir(LirSeat(1, C("AcKcQc"), bet=-100)), r"bet wager of -\$1\.00"),
        (uth(UthSeat(1, C("AcKc"), ante=100, play_multiple=5)), r"653a\.11\(b\), \(d\), \(f\)"),
    ],
)
def test_what_the_text_forbids_is_refused_naming_the_section(
    settle: Callable[[], Settlement], message: str
) -> None:
    with pytest.raises(SettlementRefused, match=message):
        settle()


@pytest.mark.parametrize(
    ("name", "wagers", "message"),
    [
        (
            "three-card-poker",
            {0: 100},
            r"seat 0: the table has betting positions 1 to 6 \(649a\.2\(a\)",
        ),
        ("ultimate-texas-holdem", {7: 100}, r"seat 7: .*\(653a\.2\(a\)"),
        ("let-it-ride", {8: 100}, r"seat 8: .*\(643a\.11\(f\)\)"),
        ("three-card-poker", {1: -100}, r"seat 1: a wager of -100 cents.*\(649a\.7\(d\)\(4\)\)"),
        ("ultimate-texas-holdem", {1: 0}, r"seat 1: a wager of 0 cents.*\(653a\.7\(d\)\(3\)\)"),
        ("let-it-ride", {1: 0}, r"seat 1: a wager of 0 cents.*\(643a\.8\(b\)\)"),
        ("three-card-poker", {1: 300}, r"a wager of \$3\.00: .*\$1 or \$5 \(649a\.12\(e\)\(5\)\)"),
        ("three-card-poker", {2: 100}, r"seats \[2\] .*give a hand or a fold \(649a\.7\(d\)\(4\)"),
        ("let-it-ride", {2: 100}, r"seats \[2\] .*give a hand or a fold \(643a\.8\(d\)"),
    ],
)
def test_each_game_module_refuses_a_table_wager_it_cannot_settle(
    name: str, wagers: dict[int, int], message: str
) -> None:
    config = GAMES[name]
    game = config.game.table_game()
    hand = C("AsKsQs") if name != "ultimate-texas-holdem" else C("AsKs")
    dealer = {"three-card-poker": C("2c7d9h"), "ultimate-texas-holdem": C("2c7d")}.get(name, ())
    community = {"ultimate-texas-holdem": C("QsJsTs3h4h"), "let-it-ride": C("3c8d")}.get(name, ())
    cards = RoundCards({1: hand}, dealer, community)
    meter = None if game.meter is None else LocalMeter(cents=game.meter.initial_cents)
    with pytest.raises(
        SettlementRefused if "hand or a fold" not in message else ValueError, match=message
    ):
        game.settle(meter, wagers, cards, frozenset(), config.table.seats)


# --- Three Card Poker (649a, 2012 text) ------------------------------------------------


@st.composite
def tcp_rounds(draw: st.DrawFn) -> TcpRound:
    d = Dealer(draw, draw(st.integers(1, 7)))
    rules = TcpRules(
        seats=d.seats,
        variant_649a7e=draw(st.sampled_from([None, None, None, 1, 2, 3])),
        progressive=draw(st.sampled_from([None, "A", "A"])),
        six_card_bonus=draw(st.sampled_from([None, "A", "E"])),
    )
    dealer = d.hand(3)
    players = []
    for _ in range(d.players()):
        ante = d.amount()
        players.append(
            TcpSeat(
                d.seat(),
                d.hand(3),
                ante=ante,
                play=draw(st.booleans()) and (bool(ante) or not d.clean),
                pair_plus=d.amount(required=not ante),
                progressive=d.amount(),
                six_card_bonus=d.amount(),
            )
        )
    meter = draw(st.sampled_from([None, LocalMeter(cents=250_000), LocalMeter(cents=250_000)]))
    return rules, players, dealer, meter


def tcp_well_formed(
    rules: TcpRules, players: list[TcpSeat], dealer: Cards, meter: LocalMeter | None
) -> bool:
    """This file's reading of 649a.7, 649a.8(d), 649a.12."""
    every = [*dealer, *(c for p in players for c in p.cards)]
    if len(dealer) != 3 or any(len(p.cards) != 3 for p in players) or len(set(every)) != len(every):
        return False
    if not seats_once([p.seat for p in players], rules.seats):
        return False
    for p in players:
        ante, pp = p.ante, p.pair_plus
        if min(ante, pp, p.progressive, p.six_card_bonus) < 0 or (p.play and not ante):
            return False
        if not ante and not pp:  # 649a.7(d)(1)-(5): every wager follows one of these
            return False
        if rules.variant_649a7e == 1 and pp and ante < pp:
            return False
        if rules.variant_649a7e == 2 and pp and 2 * ante < pp:
            return False
        if rules.variant_649a7e == 3 and (not ante or not pp or max(ante, pp) > 5 * min(ante, pp)):
            return False
        if p.six_card_bonus and rules.six_card_bonus is None:
            return False
        if p.progressive and (rules.progressive is None or meter is None):
            return False
        if p.progressive not in (0, 100, 500):
            return False
    return True


def tcp_wagers(players: list[TcpSeat]) -> list[tuple[int, str, int]]:
    out = []
    for p in players:
        named = [("ante", p.ante), ("play", p.ante if p.play else 0), ("pair-plus", p.pair_plus)]
        named += [("progressive", p.progressive), ("six-card-bonus", p.six_card_bonus)]
        out += [(p.seat, name, cents) for name, cents in named if cents]
    return out


@settings(max_examples=200, deadline=None)
@given(tcp_rounds())
def test_three_card_poker_refuses_or_settles_every_wager(
    round_: TcpRound,
) -> None:
    rules, players, dealer, meter = round_
    settles_every_wager(
        lambda: settle_three_card_poker(rules, players, dealer, meter),
        tcp_wagers(players),
        tcp_well_formed(rules, players, dealer, meter),
    )


# --- Ultimate Texas Hold 'Em (653a, 2012 text; 653a.11 as amended in 2019) --------------


@st.composite
def uth_rounds(draw: st.DrawFn) -> UthRound:
    d = Dealer(draw, draw(st.integers(1, 6)))
    rules = UthRules(
        seats=d.seats,
        trips=draw(st.sampled_from([None, "A", "A", "A"])),
        progressive=draw(st.sampled_from([False, True, True])),
        bad_beat=draw(st.sampled_from([None, UTH_BONUS, UTH_BONUS])),
        six_card_bonus=draw(st.sampled_from([None, UTH_BONUS, UTH_BONUS])),
    )
    board, dealer = d.hand(5), d.hand(2)
    players = []
    for _ in range(d.players()):
        six = d.amount()
        multiples = [0, 1, 2, 3, 4] if d.clean else [0, 1, 2, 3, 4, 5, -1]
        players.append(
            UthSeat(
                d.seat(),
                d.hand(2),
                ante=d.amount(required=True),
                play_multiple=draw(st.sampled_from(multiples)),
                trips=d.amount(),
                progressive=d.amount(),
                bad_beat=d.amount(),
                six_card_bonus=six,
                six_card_cards=d.hand(4) if six or draw(st.booleans()) else (),
            )
        )
    meter = draw(st.sampled_from([None, LocalMeter(cents=2_000_000), LocalMeter(cents=2_000_000)]))
    return rules, players, board, dealer, meter


def uth_well_formed(
    rules: UthRules, players: list[UthSeat], board: Cards, dealer: Cards, meter: LocalMeter | None
) -> bool:
    """This file's reading of 653a.7, 653a.8(d), 653a.11 (2019), 653a.12."""
    shared = [*board, *dealer, *(c for p in players for c in p.hole)]
    if len(board) != 5 or len(dealer) != 2 or any(len(p.hole) != 2 for p in players):
        return False
    if len(set(shared)) != len(shared) or not seats_once([p.seat for p in players], rules.seats):
        return False
    for p in players:
        own = [*board, *dealer, *p.hole, *p.six_card_cards]
        if len(set(own)) != len(own):
            return False
        amounts = (p.ante, p.trips, p.progressive, p.bad_beat, p.six_card_bonus)
        if min(amounts) < 0 or p.play_multiple not in range(5):
            return False
        if not p.ante:  # 653a.7(d)(1)-(3): Ante and Blind first, and only they get cards
            return False
        if (p.trips and rules.trips is None) or (p.bad_beat and rules.bad_beat is None):
            return False
        if p.six_card_bonus and (rules.six_card_bonus is None or len(p.six_card_cards) != 4):
            return False
        if p.progressive and (not rules.progressive or meter is None):
            return False
        if p.progressive not in (0, 100, 500):
            return False
    return True


def uth_wagers(players: list[UthSeat]) -> list[tuple[int, str, int]]:
    out = []
    for p in players:
        named = [("ante", p.ante), ("blind", p.ante), ("play", p.ante * p.play_multiple)]
        named += [("trips", p.trips), ("bad-beat", p.bad_beat), ("progressive", p.progressive)]
        named += [("six-card-bonus", p.six_card_bonus)]
        out += [(p.seat, name, cents) for name, cents in named if cents]
    return out


@settings(max_examples=200, deadline=None)
@given(uth_rounds())
def test_ultimate_texas_holdem_refuses_or_settles_every_wager(
    round_: UthRound,
) -> None:
    rules, players, board, dealer, meter = round_
    settles_every_wager(
        lambda: settle_ultimate_texas_holdem(rules, players, board, dealer, meter),
        uth_wagers(players),
        uth_well_formed(rules, players, board, dealer, meter),
    )


# --- Let It Ride (643a, 2011 text) --------------------------------------------------------


@st.composite
def lir_rounds(draw: st.DrawFn) -> LirRound:
    d = Dealer(draw, draw(st.integers(1, 7)))
    rules = LirRules(
        seats=d.seats,
        bonus=draw(st.sampled_from([None, "A", "A"])),
        three_card_bonus=draw(st.sampled_from([None, "A", "A"])),
    )
    community = d.hand(2)
    players = [
        LirSeat(
            d.seat(),
            d.hand(3),
            bet=d.amount(required=True),
            withdraw_bet_1=draw(st.booleans()),
            withdraw_bet_2=draw(st.booleans()),
            bonus=d.amount(),
            three_card_bonus=d.amount(),
        )
        for _ in range(d.players())
    ]
    return rules, players, community


def lir_well_formed(rules: LirRules, players: list[LirSeat], community: Cards) -> bool:
    """This file's reading of 643a.8(d), 643a.11, 643a.12."""
    every = [*community, *(c for p in players for c in p.cards)]
    if len(community) != 2 or any(len(p.cards) != 3 for p in players):
        return False
    if len(set(every)) != len(every) or not seats_once([p.seat for p in players], rules.seats):
        return False
    for p in players:
        if min(p.bet, p.bonus, p.three_card_bonus) < 0 or not p.bet:
            return False  # only a player with the three Let It Ride Poker Wagers has a hand
        if (p.bonus and rules.bonus is None) or (p.three_card_bonus and not rules.three_card_bonus):
            return False
    return True


def lir_wagers(players: list[LirSeat]) -> list[tuple[int, str, int]]:
    out = []
    for p in players:
        named = [("bet-1", p.bet), ("bet-2", p.bet), ("bet-3", p.bet), ("bonus", p.bonus)]
        named += [("three-card-bonus", p.three_card_bonus)]
        out += [(p.seat, name, cents) for name, cents in named if cents]
    return out


@settings(max_examples=200, deadline=None)
@given(lir_rounds())
def test_let_it_ride_refuses_or_settles_every_wager(
    round_: LirRound,
) -> None:
    rules, players, community = round_
    settles_every_wager(
        lambda: settle_let_it_ride(rules, players, community),
        lir_wagers(players),
        lir_well_formed(rules, players, community),
    )


# --- each game module's settle: the table-system wager, as the round core hands it over ---


@st.composite
def game_rounds(draw: st.DrawFn, name: str) -> GameRound:
    """Wagers by seat, the hands shown (players without a table-system wager among them) and
    the folds. The cards are always dealt right (each game's check_cards is tested on its
    own); a careless round has seats off the table, amounts of nothing or of no paytable,
    a wager with neither hand nor fold."""
    config = GAMES[name]
    game = config.game.table_game()
    d = Dealer(draw, config.table.seats)
    foldable = name != "let-it-ride"
    wagers: dict[int, int] = {}
    hands: dict[int, Cards] = {}
    folded: set[int] = set()
    for _ in range(d.players()):
        seat = d.seat()
        if d.clean or draw(st.booleans()):
            wagers[seat] = game.wager_cents
        elif draw(st.booleans()):
            wagers[seat] = draw(st.sampled_from([0, -100, 300, 500, 100]))
        shows = draw(st.sampled_from(["hand", "hand", "fold" if foldable else "hand", "none"]))
        if shows == "hand" or (shows == "none" and d.clean and seat in wagers):
            hands[seat] = tuple(d.cards.pop() for _ in range(HAND_SIZE[name]))
        elif shows == "fold":
            folded.add(seat)
    dealer = tuple(d.cards.pop() for _ in range(DEALER_SIZE[name]))
    community = tuple(d.cards.pop() for _ in range(COMMUNITY_SIZE[name]))
    return wagers, RoundCards(hands, dealer, community), frozenset(folded)


def game_well_formed(name: str, seats: int, round_: GameRound) -> bool:
    """This file's reading: seats of the table, wagers of the configured kind ($1 or $5 for a
    Progressive Payout Wager, 649a.12(e)(5), 653a.12(d)(5)), each with a hand or a fold."""
    wagers, cards, folded = round_
    if not all(1 <= seat <= seats for seat in {*wagers, *cards.hands, *folded}):
        return False
    allowed = (100, 500) if name != "let-it-ride" else range(1, 1 << 20)
    if any(cents not in allowed for cents in wagers.values()):
        return False
    if name == "three-card-poker" and folded & set(cards.hands):
        return False  # a forfeited hand is collected unseen (649a.11(c))
    return all(seat in cards.hands or seat in folded for seat in wagers)


@pytest.mark.parametrize("name", list(GAMES))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_each_game_module_refuses_or_settles_every_table_wager(
    name: str, data: st.DataObject
) -> None:
    config = GAMES[name]
    game = config.game.table_game()
    round_ = data.draw(game_rounds(name))
    wagers, cards, folded = round_
    meter = None if game.meter is None else LocalMeter(cents=game.meter.initial_cents)
    well_formed = game_well_formed(name, config.table.seats, round_)
    outcome: TableSettlement[LocalMeter] | ValueError
    try:
        outcome = game.settle(meter, wagers, cards, folded, config.table.seats)
    except ValueError as exc:  # the round core refuses what raises it (Rejected)
        outcome = exc
    if isinstance(outcome, ValueError):
        event("refused")
        assert SECTION.search(str(outcome)), f"no section named: {outcome}"
        assert not well_formed, f"a well-formed round was refused: {outcome}"
        return
    event("settled")
    assert well_formed, f"a malformed round was settled: {round_}"
    assert sorted(r.seat for r in outcome.results) == sorted(wagers)  # one result each
    assert all(r.paid_cents >= 0 for r in outcome.results)
    assert {h.seat for h in outcome.hits} <= set(wagers)
