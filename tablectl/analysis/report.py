"""Paytable reports by exhaustive enumeration of one 52-card deck. Pure (no I/O).

Every hand is counted exactly, in integers, and probabilities are exact fractions until they
are printed:
- three cards: all 22,100 hands;
- five cards: all 2,598,960 hands;
- the best five of six (Six Card Bonus) or seven cards (Trips): every hand is counted through
  its class -- the flushes by their suited ranks (a five-to-seven card hand with a flush can
  make nothing better than a flush or straight flush), the rest by their rank multiset times
  the suit assignments that make no flush;
- Three Card Poker Ante/Play: every player hand against every dealer hand of the other 49
  cards (407,170,400 pairs), counted by inclusion-exclusion over the shared cards;
- Let It Ride: every three-card start and four-card position under optimal withdrawal,
  through suit-isomorphism classes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from itertools import combinations, combinations_with_replacement
from math import comb, prod
from typing import Any

from tablectl.rules.cards import full_deck
from tablectl.rules.hands import five_card_classes_of_value, three_card_classes
from tablectl.rules.paytables import (
    FIXED_AMOUNT_WAGER_CENTS,
    LIR,
    PAYTABLES,
    TCP,
    UTH,
    UTH_MIN_RESET_CENTS,
    Hand,
    Pay,
    PayKind,
    Paytable,
    paytable,
)
from tablectl.rules.poker import (
    _FLUSH,
    DEALER_QUALIFIES_TCP,
    DECK_CODES,
    eval5,
    rank_only_value,
    three_card_value,
)
from tablectl.rules.progressive import MIN_RESET_CENTS


@dataclass(frozen=True, slots=True)
class Category:
    hand: str
    count: int
    pays: str
    net: Fraction  # per unit wagered on this category


@dataclass
class Report:
    game: str
    wager: str
    paytable: str
    rule: str
    hands: int
    categories: list[Category]
    expected_return: Fraction  # per unit of the initial wager
    notes: list[str] = field(default_factory=list)
    element_of_risk: Fraction | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def house_edge(self) -> Fraction:
        return -self.expected_return

    def as_json(self) -> dict[str, Any]:
        total = self.hands
        out: dict[str, Any] = {
            "game": self.game,
            "wager": self.wager,
            "paytable": self.paytable,
            "rule": self.rule,
            "hands": self.hands,
            "expected_return": float(self.expected_return),
            "house_edge": float(self.house_edge),
            "house_edge_exact": str(self.house_edge),
            "categories": [
                {
                    "hand": c.hand,
                    "count": c.count,
                    "probability": c.count / total,
                    "pays": c.pays,
                    "return": float(Fraction(c.count, total) * c.net),
                }
                for c in self.categories
            ],
        }
        if self.element_of_risk is not None:
            out["element_of_risk"] = float(self.element_of_risk)
        out.update(self.extra)
        if self.notes:
            out["notes"] = self.notes
        return out


def _net(pay: Pay | None) -> Fraction:
    """Per unit wagered (Pay.total_per_unit, the one arithmetic settlement uses too)."""
    if pay is None:
        return Fraction(-1)
    return pay.total_per_unit() - 1


def _table_report(
    table: Paytable,
    counts: Counter[Hand | None],
    hands: int,
    notes: Iterable[str] = (),
    net: Callable[[Pay], Fraction] = _net,
    pays: Callable[[Pay], str] = str,
) -> Report:
    assert sum(counts.values()) == hands, (sum(counts.values()), hands)
    cats = []
    for hand, pay in table.pays.items():
        cats.append(Category(hand.value, counts.get(hand, 0), pays(pay), net(pay)))
    cats.append(Category("no paying hand", counts.get(None, 0), "loses", Fraction(-1)))
    ev = sum((Fraction(c.count, hands) * c.net for c in cats), Fraction(0))
    return Report(table.game, table.wager, table.letter, table.rule, hands, cats, ev, list(notes))


def _classify(table: Paytable, classes: list[Hand]) -> Hand | None:
    won = table.pay_for(classes)
    return None if won is None else won[0]


# --- three cards ------------------------------------------------------------------------


def _three_card_report(table: Paytable) -> Report:
    counts: Counter[Hand | None] = Counter(
        _classify(table, three_card_classes(hand)) for hand in combinations(full_deck(), 3)
    )
    return _table_report(table, counts, comb(52, 3))


# --- best five of 5, 6 or 7 cards ---------------------------------------------------------


def _straight_flush_value(suited: tuple[int, ...]) -> int:
    """Best five of five or more ranks all of one suit."""
    return max(_FLUSH[sum(1 << (r - 2) for r in five)] for five in combinations(suited, 5))


def best_five_counts(n: int) -> Counter[int]:
    """How many n-card hands (5 <= n <= 7) have each best-five-card value. Sums to C(52, n)."""
    return Counter(dict(_best_five_counts(n)))


@cache
def _best_five_counts(n: int) -> tuple[tuple[int, int], ...]:
    values: Counter[int] = Counter()
    ranks = range(2, 15)
    # Flushes: exactly k >= 5 cards of one suit; the other n - k cards come from other suits.
    for k in range(5, n + 1):
        for suited in combinations(ranks, k):
            values[_straight_flush_value(suited)] += 4 * comb(39, n - k)
    # No flush: every rank multiset, times its suit assignments with no suit five times.
    for multiset in combinations_with_replacement(ranks, n):
        mult = Counter(multiset)
        if max(mult.values()) > 4:
            continue
        total = prod(comb(4, m) for m in mult.values())
        # For one suit: ways where that suit appears in >= 5 ranks (generating polynomial).
        poly = [1]
        for m in mult.values():
            without, with_ = comb(3, m), comb(3, m - 1)
            nxt = [0] * (len(poly) + 1)
            for i, c in enumerate(poly):
                nxt[i] += c * without
                nxt[i + 1] += c * with_
            poly = nxt
        flushes = 4 * sum(poly[5:])
        if total == flushes:
            continue
        best = max(rank_only_value(five) for five in combinations(multiset, 5))
        values[best] += total - flushes
    return tuple(values.items())


def _five_card_report(table: Paytable, n: int, notes: Iterable[str] = ()) -> Report:
    counts: Counter[Hand | None] = Counter()
    for value, count in best_five_counts(n).items():
        counts[_classify(table, five_card_classes_of_value(value))] += count
    if n == 6 and Hand.SUPER_ROYAL in table.pays:
        # 649a.6(d)(8): A-K-Q-J-10-9 suited, six cards: four hands, one in diamonds.
        counts[Hand.ROYAL_FLUSH] -= 4
        counts[Hand.SUPER_ROYAL_DIAMONDS] += 1
        counts[Hand.SUPER_ROYAL] += 3
    return _table_report(table, counts, comb(52, n), notes)


# --- progressive wagers -----------------------------------------------------------------------


def _progressive_report(
    table: Paytable, counts: Counter[Hand | None], hands: int, meter_cents: int, basis: str
) -> Report:
    """A Progressive Payout Wager of $1 with the meter at `meter_cents` (its minimum reset).

    A share of the meter has no fixed value: the report assumes the meter stands at the
    minimum initial and reset amount, for a $1 wager (a $5 wager gets five times the odds but
    the same meter), and gives the meter at which the wager would break even. Envy Bonuses
    (paid for other players' hands) and the contributions that raise the meter are not
    counted. The wager was collected at "no more bets": every pay is received in all.
    """
    wager_cents = FIXED_AMOUNT_WAGER_CENTS

    def net(pay: Pay) -> Fraction:
        if pay.kind is PayKind.METER:
            return pay.odds * meter_cents / wager_cents - 1
        return _net(pay)

    def pays(pay: Pay) -> str:
        if pay.kind is PayKind.METER:
            return f"{pay} (${float(pay.odds * meter_cents / 100):,.2f})"
        return str(pay)

    notes = [
        f"{basis}; a ${wager_cents / 100:,.2f} wager with the meter at "
        f"${meter_cents / 100:,.2f}, its minimum initial and reset amount ({table.rule}(3)); Envy "
        "Bonuses and the contributions that raise the meter are not counted"
    ]
    report = _table_report(table, counts, hands, notes, net, pays)
    # Break even: the fixed pays plus the meter rows' shares of M return every wager.
    fixed = sum(
        (
            counts.get(h, 0) * p.total_per_unit()
            for h, p in table.pays.items()
            if p.kind is not PayKind.METER
        ),
        Fraction(0),
    )
    shares = sum(
        (counts.get(h, 0) * p.odds for h, p in table.pays.items() if p.kind is PayKind.METER),
        Fraction(0),
    )
    break_even = (hands - fixed) * wager_cents / shares
    report.extra = {
        "assumed_meter_cents": meter_cents,
        "wager_cents": wager_cents,
        "break_even_meter_cents": float(break_even),
        "break_even_meter_cents_exact": str(break_even),
    }
    return report


def _tcp_progressive_report(table: Paytable) -> Report:
    """649a.12(e): on the player's three cards, all 22,100 hands."""
    counts: Counter[Hand | None] = Counter(
        _classify(table, three_card_classes(hand)) for hand in combinations(full_deck(), 3)
    )
    basis = "on the player's three cards (649a.11(c)(5))"
    return _progressive_report(table, counts, comb(52, 3), MIN_RESET_CENTS, basis)


def _uth_progressive_report(table: Paytable) -> Report:
    """653a.12(d): on the player's two cards and the three-card Flop, any five cards."""
    counts: Counter[Hand | None] = Counter()
    for value, count in best_five_counts(5).items():
        counts[_classify(table, five_card_classes_of_value(value))] += count
    basis = "on the player's two cards and the three-card Flop (653a.11(k), 2019 text)"
    return _progressive_report(table, counts, comb(52, 5), UTH_MIN_RESET_CENTS, basis)


# --- Three Card Poker Ante and Play ---------------------------------------------------------


def _ante_play_report(bonus: Paytable) -> Report:
    """Optimal play: make the Play Wager exactly when it is worth more than forfeiting."""
    deck = list(full_deck())
    hands = list(combinations(range(52), 3))
    value = {h: three_card_value([deck[i] for i in h]) for h in hands}
    every = sorted(value.values())
    by_card: dict[int, list[int]] = {i: [] for i in range(52)}
    by_pair: dict[tuple[int, int], list[int]] = {}
    for h, v in value.items():
        for i in h:
            by_card[i].append(v)
        for pair in combinations(h, 2):
            by_pair.setdefault(pair, []).append(v)
    for lst in (*by_card.values(), *by_pair.values()):
        lst.sort()

    def dealer_count(h: tuple[int, int, int], below: int, inclusive: bool = False) -> int:
        """Dealer hands from the other 49 cards with value < below (<= when inclusive)."""
        cut = bisect_right if inclusive else bisect_left
        n = cut(every, below)
        n -= sum(cut(by_card[i], below) for i in h)
        n += sum(cut(by_pair[p], below) for p in combinations(h, 2))
        return n - (value[h] <= below if inclusive else value[h] < below)

    dealer_hands = comb(49, 3)
    q = DEALER_QUALIFIES_TCP
    tally: Counter[str] = Counter()
    bonus_tally: Counter[Hand] = Counter()
    total_ev, played = Fraction(0), 0
    for h in hands:
        v = value[h]
        no_qualify = dealer_count(h, q)
        if v >= q:
            win = dealer_count(h, v) - no_qualify
            tie = dealer_count(h, v, inclusive=True) - dealer_count(h, v)
        else:
            win = tie = 0
        lose = dealer_hands - no_qualify - win - tie
        won = bonus.pay_for(three_card_classes([deck[i] for i in h]))
        bonus_net = _net(won[1]) if won else Fraction(0)
        play_ev = Fraction(no_qualify + 2 * win - 2 * lose, dealer_hands) + bonus_net
        if play_ev > -1:
            played += 1
            total_ev += play_ev
            tally["dealer does not qualify: Ante 1 to 1, Play returned"] += no_qualify
            tally["player wins: Ante and Play 1 to 1"] += win
            tally["tie: Ante and Play returned"] += tie
            tally["player loses: Ante and Play lost"] += lose
            if won:
                bonus_tally[won[0]] += dealer_hands
        else:
            total_ev -= 1
            tally["fold: Ante forfeited"] += dealer_hands
    pairs = len(hands) * dealer_hands
    nets = {
        "dealer does not qualify: Ante 1 to 1, Play returned": Fraction(1),
        "player wins: Ante and Play 1 to 1": Fraction(2),
        "tie: Ante and Play returned": Fraction(0),
        "player loses: Ante and Play lost": Fraction(-2),
        "fold: Ante forfeited": Fraction(-1),
    }
    cats = [Category(name, tally[name], "", net) for name, net in nets.items()]
    cats += [
        Category(f"ante bonus: {hand.value}", bonus_tally[hand], str(pay), _net(pay))
        for hand, pay in bonus.pays.items()
    ]
    ev = total_ev / len(hands)
    average_wager = 1 + Fraction(played, len(hands))
    wager = "ante-play" if bonus.wager == "ante-bonus" else "ante-play-649a7e"
    report = Report(TCP, wager, bonus.letter, f"649a.11(c), {bonus.rule}", pairs, cats, ev)
    report.element_of_risk = -ev / average_wager
    report.extra = {
        "play_frequency": played / len(hands),
        "strategy": "make the Play Wager when its expected value beats forfeiting the Ante",
        "note": "category counts are player-dealer hand pairs; the Ante Bonus rows count the "
        "pairs in which it is paid, on top of the outcome rows",
    }
    return report


# --- Let It Ride base game ------------------------------------------------------------------


def _canonical(cards: Iterable[int]) -> tuple[tuple[int, ...], ...]:
    """The same key for every hand that differs only by a renaming of suits."""
    suits: list[list[int]] = [[], [], [], []]
    for i in cards:
        suits[i // 13].append(i % 13)
    return tuple(sorted((tuple(sorted(s)) for s in suits), key=lambda s: (len(s), s), reverse=True))


def _representative(key: tuple[tuple[int, ...], ...]) -> list[int]:
    return [suit * 13 + rank for suit, ranks in enumerate(key) for rank in ranks]


def _lir_report(table: Paytable) -> Report:
    """643a.11(b), (d): withdraw Bet 1 after three cards, Bet 2 after four, when it pays to."""
    net_by_value: dict[int, Fraction] = {}

    def net(value: int) -> Fraction:
        if value not in net_by_value:
            won = table.pay_for(five_card_classes_of_value(value))
            net_by_value[value] = _net(won[1]) if won else Fraction(-1)
        return net_by_value[value]

    four_ev: dict[tuple[tuple[int, ...], ...], Fraction] = {}

    def ev4(cards: list[int]) -> Fraction:
        key = _canonical(cards)
        if key not in four_ev:
            rep = _representative(key)
            a, b, c, d = (DECK_CODES[i] for i in rep)
            rest = [DECK_CODES[i] for i in range(52) if i not in rep]
            four_ev[key] = sum((net(eval5(a, b, c, d, e)) for e in rest), Fraction(0)) / 48
        return four_ev[key]

    starts: Counter[tuple[tuple[int, ...], ...]] = Counter(
        _canonical(h) for h in combinations(range(52), 3)
    )
    total, units, keep1, keep2 = Fraction(0), Fraction(0), 0, Fraction(0)
    for key, weight in starts.items():
        rep = _representative(key)
        evs = [ev4([*rep, c]) for c in range(52) if c not in rep]
        e3 = sum(evs, Fraction(0)) / 49
        ride2 = sum((e for e in evs if e > 0), Fraction(0)) / 49
        share2 = Fraction(sum(e > 0 for e in evs), 49)
        bet1 = e3 if e3 > 0 else Fraction(0)
        total += weight * (e3 + bet1 + ride2)
        units += weight * (1 + (e3 > 0) + share2)
        keep1 += weight * (e3 > 0)
        keep2 += weight * share2
    n3 = comb(52, 3)
    ev = total / n3
    counts: Counter[Hand | None] = Counter()
    for value, count in best_five_counts(5).items():
        counts[_classify(table, five_card_classes_of_value(value))] += count
    report = _table_report(table, counts, comb(52, 5))
    report.expected_return = ev
    report.element_of_risk = -ev / (units / n3)
    report.extra = {
        "bet_1_rides": keep1 / n3,
        "bet_2_rides": float(keep2 / n3),
        "average_units_wagered": float(units / n3),
        "strategy": "let a bet ride when the hand's expected payout is positive",
        "note": "category rows are the final five-card hands (one unit each); expected_return "
        "and house_edge are per unit with optimal withdrawal of Bets 1 and 2",
    }
    return report


# --- the report catalogue -------------------------------------------------------------------

LIR_BONUS_NOTE = (
    "643a.12(b)'s amounts are for a $1 wager (a larger one is paid in proportion) and are all "
    "a winner receives: the Bonus Wager was collected before the deal (643a.8(b))"
)

# (game, report wager) -> (the paytable's wager in PAYTABLES, how to build the report)
REPORTS: dict[tuple[str, str], tuple[str, Callable[[Paytable], Report]]] = {
    (TCP, "pair-plus"): ("pair-plus", _three_card_report),
    (TCP, "ante-play"): ("ante-bonus", _ante_play_report),
    (TCP, "ante-play-649a7e"): ("ante-bonus-649a7e", _ante_play_report),
    (TCP, "progressive"): ("progressive", _tcp_progressive_report),
    (TCP, "six-card-bonus"): ("six-card-bonus", lambda t: _five_card_report(t, 6)),
    (LIR, "base"): ("base", _lir_report),
    (LIR, "bonus"): ("bonus", lambda t: _five_card_report(t, 5, [LIR_BONUS_NOTE])),
    (LIR, "three-card-bonus"): ("three-card-bonus", _three_card_report),
    (UTH, "trips"): ("trips", lambda t: _five_card_report(t, 7)),
    (UTH, "progressive"): ("progressive", _uth_progressive_report),
}

# Paytables with no report of their own, and why.
UNREPORTED: dict[tuple[str, str], str] = {
    (UTH, "blind"): (
        "the Blind is settled with the Ante and Play against the dealer's hand, so its return "
        "is the base game's; an exact base-game house edge needs the optimal Play decision "
        "(4x, 3x, 2x, 1x or fold) over every hole, Flop, turn and river and dealer hand, about "
        "10^12 cases, which this enumerator does not solve"
    ),
}


class ReportError(ValueError):
    """An unknown game, wager or paytable; the message lists the valid choices."""


def report(game: str, wager: str, letter: str) -> Report:
    games = sorted({g for g, _ in REPORTS})
    if game not in games:
        raise ReportError(f"unknown game {game!r}; choose one of: {', '.join(games)}")
    if (game, wager) in UNREPORTED:
        raise ReportError(f"no report for {game} {wager}: {UNREPORTED[game, wager]}")
    wagers = sorted(w for g, w in REPORTS if g == game)
    if wager not in wagers:
        raise ReportError(f"unknown wager {wager!r} for {game}; choose one of: {', '.join(wagers)}")
    table_name, build = REPORTS[game, wager]
    letters = sorted(p for g, w, p in PAYTABLES if (g, w) == (game, table_name))
    if letter not in letters:
        raise ReportError(
            f"unknown paytable {letter!r} for {game} {wager}; choose one of: {', '.join(letters)}"
        )
    return build(paytable(game, table_name, letter))
