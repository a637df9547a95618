"""Playing cards: parsing, printing, the 52-card deck. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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


class RandomSource(Protocol):
    def shuffle(self, x: list[Card]) -> None: ...


def shuffled_deck(rng: RandomSource) -> list[Card]:
    """A shuffled 52-card deck; pass random.SystemRandom() in play, a seeded Random in tests."""
    deck = list(full_deck())
    rng.shuffle(deck)
    return deck
