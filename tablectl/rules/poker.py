"""Poker hand rankings: Three Card Poker (649a.6) and five-card Poker (653a.6, 649a.6(d)). Pure.

Hand values are integers that order hands exactly as the rules do: a higher value is a
higher hand, equal values tie. `value >> CATEGORY_SHIFT` is the hand's category.

The five-card evaluator is table driven (the technique of Cactus Kev's evaluator): each card
is an int carrying its rank prime, rank bit and suit bit; a flush is looked up by its rank
bits, five distinct ranks by their rank bits, anything with a repeated rank by the product of
its rank primes. The tables are built once from `_reference_value`, the rules as code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from enum import IntEnum
from functools import cache
from itertools import combinations, combinations_with_replacement
from math import prod

from tablectl.rules.cards import Card, full_deck

CATEGORY_SHIFT = 20  # five tie-break ranks of 4 bits each sit below the category
THREE_CATEGORY_SHIFT = 12
PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)  # for ranks 2..A
SUIT_BITS = {"c": 0x1000, "d": 0x2000, "h": 0x4000, "s": 0x8000}


class FiveCardCategory(IntEnum):
    """653a.6(b), lowest first. A royal flush is its own category above other straight flushes."""

    HIGH_CARD = 0
    PAIR = 1
    TWO_PAIR = 2
    THREE_OF_A_KIND = 3
    STRAIGHT = 4
    FLUSH = 5
    FULL_HOUSE = 6
    FOUR_OF_A_KIND = 7
    STRAIGHT_FLUSH = 8
    ROYAL_FLUSH = 9


class ThreeCardCategory(IntEnum):
    """649a.6(b), lowest first."""

    HIGH_CARD = 0
    PAIR = 1
    FLUSH = 2
    STRAIGHT = 3
    THREE_OF_A_KIND = 4
    STRAIGHT_FLUSH = 5


def _pack(category: int, tiebreak: Sequence[int], shift: int) -> int:
    value = category
    for rank in tiebreak:
        value = value << 4 | rank
    return value << 4 * (shift // 4 - len(tiebreak))


def _straight_high(ranks: Sequence[int], length: int) -> int | None:
    """High card of a straight of these ranks; an ace plays low only in A-2-3(-4-5)."""
    distinct = sorted(set(ranks))
    if len(distinct) != length:
        return None
    if distinct[-1] - distinct[0] == length - 1:
        return distinct[-1]
    if distinct == [*range(2, length + 1), 14]:
        return length
    return None


def _reference_value(ranks: Sequence[int], flush: bool) -> int:
    """653a.6 as written: category, then the highest card not in the other hand (653a.6(c))."""
    groups = sorted(Counter(ranks).items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    shape = [count for _, count in groups]
    by_group = [rank for rank, _ in groups]
    high = _straight_high(ranks, 5)
    if high is not None and flush:
        cat = FiveCardCategory.ROYAL_FLUSH if high == 14 else FiveCardCategory.STRAIGHT_FLUSH
        return _pack(cat, [high], CATEGORY_SHIFT)
    if shape[0] == 4:
        return _pack(FiveCardCategory.FOUR_OF_A_KIND, by_group, CATEGORY_SHIFT)
    if shape[:2] == [3, 2]:
        return _pack(FiveCardCategory.FULL_HOUSE, by_group, CATEGORY_SHIFT)
    if flush:
        return _pack(FiveCardCategory.FLUSH, by_group, CATEGORY_SHIFT)
    if high is not None:
        return _pack(FiveCardCategory.STRAIGHT, [high], CATEGORY_SHIFT)
    if shape[0] == 3:
        return _pack(FiveCardCategory.THREE_OF_A_KIND, by_group, CATEGORY_SHIFT)
    if shape[:2] == [2, 2]:
        return _pack(FiveCardCategory.TWO_PAIR, by_group, CATEGORY_SHIFT)
    if shape[0] == 2:
        return _pack(FiveCardCategory.PAIR, by_group, CATEGORY_SHIFT)
    return _pack(FiveCardCategory.HIGH_CARD, by_group, CATEGORY_SHIFT)


def _build_tables() -> tuple[list[int], list[int], dict[int, int]]:
    flushes = [0] * (1 << 13)
    uniques = [0] * (1 << 13)
    for ranks in combinations(range(2, 15), 5):
        bits = sum(1 << (r - 2) for r in ranks)
        flushes[bits] = _reference_value(ranks, True)
        uniques[bits] = _reference_value(ranks, False)
    products: dict[int, int] = {}
    for ranks in combinations_with_replacement(range(2, 15), 5):
        if len(set(ranks)) < 5 and max(Counter(ranks).values()) <= 4:
            product = 1
            for r in ranks:
                product *= PRIMES[r - 2]
            products[product] = _reference_value(ranks, False)
    return flushes, uniques, products


# Filled at the first evaluation, not at import: building them (about 50 ms of CPU) was
# paid by every start of the daemon, which needs them only at its first settlement
# (bench/startup.py).
_FLUSH: list[int] = []
_UNIQUE: list[int] = []
_PRODUCT: dict[int, int] = {}


def _fill_tables() -> None:
    """The three tables, once. Two threads that both find them empty fill them with the same
    values; _FLUSH is filled last, so once it is not empty all three are there."""
    flushes, uniques, products = _build_tables()
    _PRODUCT.update(products)
    _UNIQUE[:] = uniques
    _FLUSH[:] = flushes


def card_code(card: Card) -> int:
    """The evaluator's int for a card: rank bit | suit bit | rank | rank prime."""
    r = card.rank - 2
    return 1 << (16 + r) | SUIT_BITS[card.suit] | r << 8 | PRIMES[r]


DECK_CODES: tuple[int, ...] = tuple(card_code(c) for c in full_deck())  # in full_deck()'s order


def eval5(c1: int, c2: int, c3: int, c4: int, c5: int) -> int:
    """Value of exactly five cards given as card codes."""
    if not _FLUSH:
        _fill_tables()
    if c1 & c2 & c3 & c4 & c5 & 0xF000:
        return _FLUSH[(c1 | c2 | c3 | c4 | c5) >> 16]
    unique = _UNIQUE[(c1 | c2 | c3 | c4 | c5) >> 16]
    if unique:
        return unique
    return _PRODUCT[(c1 & 0xFF) * (c2 & 0xFF) * (c3 & 0xFF) * (c4 & 0xFF) * (c5 & 0xFF)]


def rank_only_value(ranks: Sequence[int]) -> int:
    """Value of five ranks that make no flush, from the same tables."""
    if not _FLUSH:
        _fill_tables()
    bits = 0
    product = 1
    for r in ranks:
        bits |= 1 << (r - 2)
        product *= PRIMES[r - 2]
    return _UNIQUE[bits] or _PRODUCT[product]


@cache
def _seven_without_flush() -> dict[int, int]:
    """Best five of seven ranks, keyed by the ranks' prime product (built once, about 1 s)."""
    table = {}
    for ranks in combinations_with_replacement(range(2, 15), 7):
        if max(Counter(ranks).values()) <= 4:
            key = prod(PRIMES[r - 2] for r in ranks)
            table[key] = max(rank_only_value(five) for five in combinations(ranks, 5))
    return table


def prepare_seven_card_evaluation() -> None:
    """Build the seven-card rank table now (about a second) rather than at the first hand."""
    _seven_without_flush()


def best_of(codes: Sequence[int]) -> int:
    """Value of the best five-card hand among five to seven cards (653a.11(g), 649a.11(c)(6))."""
    # The rank table pays off over many hands (analysis); until someone built it, a table's one
    # hand is 21 five-card lookups: building it at a settlement would hold the loop a second.
    if len(codes) == 7 and _seven_without_flush.cache_info().currsize:
        suits = [c & 0xF000 for c in codes]
        if max(map(suits.count, set(suits))) < 5:
            # No flush possible: the best hand depends on the ranks alone.
            key = 1
            for c in codes:
                key *= c & 0xFF
            return _seven_without_flush()[key]
    return max(eval5(*five) for five in combinations(codes, 5))


def five_card_value(cards: Iterable[Card]) -> int:
    """The best five-card hand that these 5, 6 or 7 cards form."""
    codes = [card_code(c) for c in cards]
    if not 5 <= len(codes) <= 7 or len(set(codes)) != len(codes):
        raise ValueError("a five-card Poker hand is made from 5 to 7 different cards")
    return best_of(codes)


# The categories by value (0, 1, ...): indexed, not called (an enum call is two Python frames
# in the enum module, per hand settled).
_FIVE_CATEGORIES = tuple(FiveCardCategory)
_THREE_CATEGORIES = tuple(ThreeCardCategory)


def five_card_category(value: int) -> FiveCardCategory:
    return _FIVE_CATEGORIES[value >> CATEGORY_SHIFT]


def pair_rank(value: int) -> int:
    """The rank of the pair in a one-pair hand (Let It Ride's "pair of tens or better")."""
    return value >> (CATEGORY_SHIFT - 4) & 0xF


def is_super_royal(cards: Sequence[Card]) -> bool:
    """649a.6(d)(8): ace, king, queen, jack, 10 and 9 of the same suit (six cards)."""
    return (
        len(cards) == 6
        and len({c.suit for c in cards}) == 1
        and sorted(c.rank for c in cards) == [9, 10, 11, 12, 13, 14]
    )


def three_card_value(cards: Sequence[Card]) -> int:
    """649a.6: SF > trips > straight > flush > pair > high card; A-2-3 is the lowest straight."""
    if len(cards) != 3 or len(set(cards)) != 3:
        raise ValueError("a Three Card Poker hand is three different cards")
    ranks = sorted((c.rank for c in cards), reverse=True)
    flush = len({c.suit for c in cards}) == 1
    high = _straight_high(ranks, 3)
    shift = THREE_CATEGORY_SHIFT
    if high is not None:
        cat = ThreeCardCategory.STRAIGHT_FLUSH if flush else ThreeCardCategory.STRAIGHT
        return _pack(cat, [high], shift)
    if ranks[0] == ranks[2]:
        return _pack(ThreeCardCategory.THREE_OF_A_KIND, [ranks[0]], shift)
    if flush:
        return _pack(ThreeCardCategory.FLUSH, ranks, shift)
    if ranks[0] == ranks[1] or ranks[1] == ranks[2]:
        pair, kicker = (ranks[1], ranks[2] if ranks[0] == ranks[1] else ranks[0])
        return _pack(ThreeCardCategory.PAIR, [pair, kicker], shift)
    return _pack(ThreeCardCategory.HIGH_CARD, ranks, shift)


def three_card_category(value: int) -> ThreeCardCategory:
    return _THREE_CATEGORIES[value >> THREE_CATEGORY_SHIFT]


# 649a.11(c)(3): the dealer plays with queen high or better; Q-3-2 is the lowest such hand.
DEALER_QUALIFIES_TCP = _pack(ThreeCardCategory.HIGH_CARD, [12, 3, 2], THREE_CATEGORY_SHIFT)
# 653a.11(h): the dealer's Ante is in play with a pair or better.
DEALER_QUALIFIES_UTH = FiveCardCategory.PAIR << CATEGORY_SHIFT
