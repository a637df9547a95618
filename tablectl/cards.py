"""Playing cards and the Three Card Poker ranking of 649a.6. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

RANKS = "23456789TJQKA"
SUITS = "cdhs"


@dataclass(frozen=True, slots=True, order=True)
class Card:
    rank: int  # 2..14, ace high
    suit: str  # one of "cdhs"

    def __post_init__(self) -> None:
        if not 2 <= self.rank <= 14 or self.suit not in SUITS:
            raise ValueError(f"not a card: rank {self.rank}, suit {self.suit!r}")

    @classmethod
    def parse(cls, text: str) -> Card:
        """Parse "As", "Td", "2c" (rank then suit, case-insensitive suit)."""
        if len(text) != 2 or text[0].upper() not in RANKS or text[1].lower() not in SUITS:
            raise ValueError(f"not a card: {text!r} (expected e.g. As, Td, 2c)")
        return cls(RANKS.index(text[0].upper()) + 2, text[1].lower())

    def __str__(self) -> str:
        return RANKS[self.rank - 2] + self.suit


def parse_cards(text: str) -> tuple[Card, ...]:
    """Parse a run of cards such as "AsKsQs" or "As Ks Qs"."""
    compact = text.replace(" ", "").replace(",", "")
    if len(compact) % 2:
        raise ValueError(f"not a run of cards: {text!r}")
    return tuple(Card.parse(compact[i : i + 2]) for i in range(0, len(compact), 2))


def full_deck() -> tuple[Card, ...]:
    return tuple(Card(rank, suit) for suit in SUITS for rank in range(2, 15))


class ThreeCardCategory(IntEnum):
    """649a.6(b): higher value ranks higher."""

    HIGH_CARD = 0
    PAIR = 1
    FLUSH = 2
    STRAIGHT = 3
    THREE_OF_A_KIND = 4
    STRAIGHT_FLUSH = 5


def three_card_category(cards: tuple[Card, ...]) -> ThreeCardCategory:
    """Rank a Three Card Poker hand (649a.6): A-2-3 is the lowest straight, A-K-Q the highest."""
    if len(cards) != 3 or len(set(cards)) != 3:
        raise ValueError("a Three Card Poker hand is three different cards")
    ranks = sorted(c.rank for c in cards)
    flush = len({c.suit for c in cards}) == 1
    straight = (ranks[2] - ranks[0] == 2 and len(set(ranks)) == 3) or ranks == [2, 3, 14]
    if straight and flush:
        return ThreeCardCategory.STRAIGHT_FLUSH
    if len(set(ranks)) == 1:
        return ThreeCardCategory.THREE_OF_A_KIND
    if straight:
        return ThreeCardCategory.STRAIGHT
    if flush:
        return ThreeCardCategory.FLUSH
    if len(set(ranks)) == 2:
        return ThreeCardCategory.PAIR
    return ThreeCardCategory.HIGH_CARD


def is_mini_royal(cards: tuple[Card, ...]) -> bool:
    """Ace, king and queen of one suit."""
    return sorted(c.rank for c in cards) == [12, 13, 14] and len({c.suit for c in cards}) == 1
