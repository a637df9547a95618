"""Which paying hand classes a hand makes, highest first, for each kind of wager. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from tablectl.rules.cards import Card
from tablectl.rules.paytables import Hand
from tablectl.rules.poker import (
    FiveCardCategory,
    ThreeCardCategory,
    five_card_category,
    five_card_value,
    is_super_royal,
    pair_rank,
    three_card_category,
    three_card_value,
)

_THREE = {
    ThreeCardCategory.STRAIGHT_FLUSH: Hand.STRAIGHT_FLUSH,
    ThreeCardCategory.THREE_OF_A_KIND: Hand.THREE_OF_A_KIND,
    ThreeCardCategory.STRAIGHT: Hand.STRAIGHT,
    ThreeCardCategory.FLUSH: Hand.FLUSH,
    ThreeCardCategory.PAIR: Hand.PAIR,
}
_FIVE = {
    FiveCardCategory.ROYAL_FLUSH: Hand.ROYAL_FLUSH,
    FiveCardCategory.STRAIGHT_FLUSH: Hand.STRAIGHT_FLUSH,
    FiveCardCategory.FOUR_OF_A_KIND: Hand.FOUR_OF_A_KIND,
    FiveCardCategory.FULL_HOUSE: Hand.FULL_HOUSE,
    FiveCardCategory.FLUSH: Hand.FLUSH,
    FiveCardCategory.STRAIGHT: Hand.STRAIGHT,
    FiveCardCategory.THREE_OF_A_KIND: Hand.THREE_OF_A_KIND,
    FiveCardCategory.TWO_PAIR: Hand.TWO_PAIR,
    FiveCardCategory.PAIR: Hand.PAIR,
}


def three_card_classes(cards: Sequence[Card]) -> list[Hand]:
    """Classes of a three-card hand: an ace-king-queen suited is also a straight flush."""
    category = three_card_category(three_card_value(cards))
    classes = []
    if category is ThreeCardCategory.STRAIGHT_FLUSH and min(c.rank for c in cards) == 12:
        if cards[0].suit == "s":
            classes.append(Hand.MINI_ROYAL_SPADES)
        classes.append(Hand.MINI_ROYAL)
    if category in _THREE:
        classes.append(_THREE[category])
    return classes


def five_card_classes_of_value(value: int) -> list[Hand]:
    category = five_card_category(value)
    if category is FiveCardCategory.HIGH_CARD:
        return []
    classes = [_FIVE[category]]
    if category is FiveCardCategory.ROYAL_FLUSH:
        classes.append(Hand.STRAIGHT_FLUSH)  # a table without a royal row pays it as one
    if category is FiveCardCategory.PAIR and pair_rank(value) >= 10:
        classes.insert(0, Hand.PAIR_TENS_OR_BETTER)
    return classes


def five_card_classes(cards: Sequence[Card]) -> list[Hand]:
    """Classes of the best five-card hand among 5 to 7 cards."""
    return five_card_classes_of_value(five_card_value(cards))


def six_card_bonus_classes(cards: Sequence[Card]) -> list[Hand]:
    """649a.11(c)(6): the best five of the player's and dealer's six cards; the six-card Super
    Royal (649a.6(d)(8)) counts where paytable E lists it."""
    classes = []
    if is_super_royal(cards):
        if cards[0].suit == "d":
            classes.append(Hand.SUPER_ROYAL_DIAMONDS)
        classes.append(Hand.SUPER_ROYAL)
    return classes + five_card_classes(cards)
