"""Hand rankings: exact category counts, and the same order as an independent evaluator."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

import pytest
from treys import Card as TreysCard
from treys import Evaluator

from tablectl.rules import poker
from tablectl.rules.cards import Card, full_deck, parse_cards, shuffled_deck
from tablectl.rules.poker import (
    DEALER_QUALIFIES_TCP,
    DECK_CODES,
    FiveCardCategory,
    ThreeCardCategory,
    best_of,
    eval5,
    five_card_category,
    five_card_value,
    prepare_seven_card_evaluation,
    three_card_category,
    three_card_value,
)

F, T = FiveCardCategory, ThreeCardCategory


def test_card_text_round_trips() -> None:
    assert [str(c) for c in parse_cards("As Td 2c")] == ["As", "Td", "2c"]
    with pytest.raises(ValueError, match="not a card"):
        Card.parse("1x")


def test_shuffled_deck_uses_the_given_randomness() -> None:
    a, b = shuffled_deck(random.Random(5)), shuffled_deck(random.Random(5))
    assert a == b and sorted(a) == sorted(full_deck()) and a != sorted(a)


def test_three_card_category_counts() -> None:
    counts = Counter(three_card_category(three_card_value(h)) for h in combinations(full_deck(), 3))
    assert counts == {
        T.STRAIGHT_FLUSH: 48,
        T.THREE_OF_A_KIND: 52,
        T.STRAIGHT: 720,
        T.FLUSH: 1_096,
        T.PAIR: 3_744,
        T.HIGH_CARD: 16_440,
    }


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("As2d3c", "2s3d4c"),  # A-2-3 is the lowest straight (649a.6(a))
        ("QsKdAc", "2s2d2c"),  # A-K-Q straight < three-of-a-kind
        ("AsKsJs", "2c3d4h"),  # flush < straight in Three Card Poker
        ("KsKdAc", "AsAd2c"),
        ("AsKdJc", "AdKcQh"),  # highest differing card decides
    ],
)
def test_three_card_order(low: str, high: str) -> None:
    assert three_card_value(parse_cards(low)) < three_card_value(parse_cards(high))


def test_three_card_tie_and_dealer_qualifier() -> None:
    assert three_card_value(parse_cards("AsKd9c")) == three_card_value(parse_cards("AhKc9d"))
    assert three_card_value(parse_cards("Qs3d2c")) == DEALER_QUALIFIES_TCP
    assert three_card_value(parse_cards("JsTd8c")) < DEALER_QUALIFIES_TCP


def test_five_card_category_counts() -> None:
    counts = Counter(v >> 20 for v in (eval5(*h) for h in combinations(DECK_CODES, 5)))
    assert {FiveCardCategory(k): n for k, n in counts.items()} == {
        F.ROYAL_FLUSH: 4,
        F.STRAIGHT_FLUSH: 36,
        F.FOUR_OF_A_KIND: 624,
        F.FULL_HOUSE: 3_744,
        F.FLUSH: 5_108,
        F.STRAIGHT: 10_200,
        F.THREE_OF_A_KIND: 54_912,
        F.TWO_PAIR: 123_552,
        F.PAIR: 1_098_240,
        F.HIGH_CARD: 1_302_540,
    }


EVALUATOR = Evaluator()


def _treys(cards: list[Card]) -> int:
    return int(
        EVALUATOR.evaluate(
            [TreysCard.new(str(c)) for c in cards[:2]], [TreysCard.new(str(c)) for c in cards[2:]]
        )
    )


@pytest.mark.slow
def test_five_card_order_matches_treys_on_every_hand() -> None:
    """All 2,598,960 hands: ours and treys' must induce the same total preorder."""
    treys_codes = [TreysCard.new(str(c)) for c in full_deck()]
    ours_to_treys: dict[int, int] = {}
    five = EVALUATOR.hand_size_map[5]
    for idx in combinations(range(52), 5):
        ours = eval5(*(DECK_CODES[i] for i in idx))
        theirs = five([treys_codes[i] for i in idx])
        assert ours_to_treys.setdefault(ours, theirs) == theirs
    # One treys class per value of ours, and the same order (treys: lower is better).
    ordered = sorted(ours_to_treys)
    assert len(ordered) == 7_462
    assert [ours_to_treys[v] for v in ordered] == sorted(ours_to_treys.values(), reverse=True)


def test_seven_card_order_matches_treys_on_a_random_sample() -> None:
    rng = random.Random(20261202)
    deck = list(full_deck())
    for _ in range(50_000):
        a, b = rng.sample(deck, 7), rng.sample(deck, 7)
        ours = (five_card_value(a) > five_card_value(b)) - (five_card_value(a) < five_card_value(b))
        theirs = (_treys(a) < _treys(b)) - (_treys(a) > _treys(b))
        assert ours == theirs, (a, b)


def test_seven_cards_valued_alike_before_and_after_the_rank_table_is_built() -> None:
    """A table's settlement values seven cards without the rank table (building it would hold
    the loop a second); analysis builds it first. Both ways give the same value."""
    rng = random.Random(20261206)
    hands = [rng.sample(DECK_CODES, 7) for _ in range(3_000)]
    hands += [[c for c in DECK_CODES if c & 0xFF in (2, 3)][:7]]  # quads and trips, no flush
    poker._seven_without_flush.cache_clear()  # as at a start: not built
    unprepared = [best_of(h) for h in hands]
    prepare_seven_card_evaluation()
    assert [best_of(h) for h in hands] == unprepared


@pytest.mark.parametrize(
    ("cards", "category"),
    [
        ("AsKsQsJsTs", F.ROYAL_FLUSH),
        ("As2s3s4s5s", F.STRAIGHT_FLUSH),
        ("As2d3c4h5s", F.STRAIGHT),  # the wheel
        ("QsKdAc2h3s", F.HIGH_CARD),  # no wrap-around (653a.6(a))
        ("AsKsQsJsTs9s", F.ROYAL_FLUSH),
        ("2c2d2h5s5c9d9h", F.FULL_HOUSE),
    ],
)
def test_five_card_categories(cards: str, category: FiveCardCategory) -> None:
    assert five_card_category(five_card_value(parse_cards(cards))) is category
