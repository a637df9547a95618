"""Three Card Poker progressive: meter arithmetic, paytables and Envy Bonuses (649a.12(e)). Pure.

Money is integer cents. A contribution is wager x rate of progression; the part below one
cent is carried forward in ten-thousandths of a cent, so no contribution is ever rounded away.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from tablectl.cards import Card, ThreeCardCategory, is_mini_royal, three_card_category

# Rates are whole basis points (hundredths of a percent); a contribution's exact value is
# wager_cents * rate_bp ten-thousandths of a cent.
CARRY_DENOMINATOR = 10_000


class Meter(BaseModel):
    """A progressive meter: whole cents shown and paid, plus the carried fraction of a cent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cents: int
    carry: int = 0  # ten-thousandths of a cent, 0 <= carry < CARRY_DENOMINATOR

    @property
    def units(self) -> int:
        return self.cents * CARRY_DENOMINATOR + self.carry

    @classmethod
    def from_units(cls, units: int) -> Meter:
        cents, carry = divmod(units, CARRY_DENOMINATOR)
        return cls(cents=cents, carry=carry)

    def add_units(self, units: int) -> Meter:
        return Meter.from_units(self.units + units)

    def reset_to(self, reset_cents: int) -> Meter:
        """100% hit: the meter restarts at the reset amount; the carried fraction stays on it."""
        return Meter(cents=reset_cents, carry=self.carry)


def contribution_units(wager_cents: int, rate_bp: int) -> int:
    """649a.12(e)(3): the rate of progression's share of one wager, exact."""
    return wager_cents * rate_bp


class ProgressiveHand(StrEnum):
    """Progressive Payout Hands of 649a.12(e)(1), highest first."""

    MINI_ROYAL_SPADES = "ace-king-queen-of-spades"
    MINI_ROYAL = "ace-king-queen-suited"
    STRAIGHT_FLUSH = "straight-flush"
    THREE_OF_A_KIND = "three-of-a-kind"
    STRAIGHT = "straight"


# 649a.12(e)(1): None means 100% of the meter; otherwise "N for 1" (the payout includes the wager).
PROGRESSIVE_PAYTABLES: dict[str, dict[ProgressiveHand, int | None]] = {
    "A": {
        ProgressiveHand.MINI_ROYAL_SPADES: None,
        ProgressiveHand.MINI_ROYAL: 500,
        ProgressiveHand.STRAIGHT_FLUSH: 70,
        ProgressiveHand.THREE_OF_A_KIND: 60,
        ProgressiveHand.STRAIGHT: 6,
    },
    "B": {
        ProgressiveHand.MINI_ROYAL_SPADES: None,
        ProgressiveHand.MINI_ROYAL: 500,
        ProgressiveHand.STRAIGHT_FLUSH: 100,
        ProgressiveHand.THREE_OF_A_KIND: 90,
    },
}

# 649a.12(e)(3): minimum rate of progression per paytable, in basis points.
MIN_RATE_BP = {"A": 1400, "B": 2000}
MIN_RESET_CENTS = 100_000  # 649a.12(e)(3): initial and reset amount at least $1,000

# 649a.12(e)(5): Envy Bonus by the receiving player's Progressive Payout Wager.
ENVY_BONUS_CENTS: dict[int, dict[ProgressiveHand, int]] = {
    100: {ProgressiveHand.MINI_ROYAL_SPADES: 10_000, ProgressiveHand.MINI_ROYAL: 2_500},
    500: {ProgressiveHand.MINI_ROYAL_SPADES: 50_000, ProgressiveHand.MINI_ROYAL: 12_500},
}
PROGRESSIVE_WAGERS_CENTS = tuple(ENVY_BONUS_CENTS)


def progressive_hand(cards: tuple[Card, ...]) -> ProgressiveHand | None:
    """The highest Progressive Payout Hand these cards form (649a.12(e)(2)), if any."""
    if is_mini_royal(cards):
        spades = cards[0].suit == "s"
        return ProgressiveHand.MINI_ROYAL_SPADES if spades else ProgressiveHand.MINI_ROYAL
    return {
        ThreeCardCategory.STRAIGHT_FLUSH: ProgressiveHand.STRAIGHT_FLUSH,
        ThreeCardCategory.THREE_OF_A_KIND: ProgressiveHand.THREE_OF_A_KIND,
        ThreeCardCategory.STRAIGHT: ProgressiveHand.STRAIGHT,
    }.get(three_card_category(cards))


@dataclass(frozen=True, slots=True)
class ProgressivePayout:
    seat: int
    hand: ProgressiveHand
    amount_cents: int
    from_meter: bool  # 100% of the meter, paid not from the table inventory (649a.11(c)(5)(iv))
    meter_before_cents: int


@dataclass(frozen=True, slots=True)
class EnvyBonus:
    seat: int  # the player receiving the bonus
    for_seat: int  # the other player holding the Envy Bonus Qualifying Hand
    hand: ProgressiveHand
    amount_cents: int


def settlement_order(seats: int) -> list[int]:
    """649a.11(c): from the player farthest to the dealer's right, counter-clockwise.

    Seat 1 is farthest to the dealer's left (dealt first, 649a.8(d)), so that is N, N-1, ... 1.
    """
    return list(range(seats, 0, -1))


def settle_progressive(
    *,
    paytable: str,
    seats: int,
    reset_cents: int,
    meter: Meter,
    wagers: dict[int, int],
    hands: dict[int, tuple[Card, ...]],
    folded: frozenset[int],
) -> tuple[Meter, list[ProgressivePayout | EnvyBonus]]:
    """Pay each seat in turn at the meter as it stands then (649a.12(e)(4)), with Envy Bonuses.

    A folded player forfeits the Progressive Payout Wager but keeps Envy Bonus eligibility
    (649a.11(b)(2)); a folded hand is not shown, so it earns no one an Envy Bonus.
    """
    table = PROGRESSIVE_PAYTABLES[paytable]
    qualifying = {seat: progressive_hand(cards) for seat, cards in hands.items()}
    envy_hands = {
        seat: hand
        for seat, hand in qualifying.items()
        if hand in (ProgressiveHand.MINI_ROYAL_SPADES, ProgressiveHand.MINI_ROYAL)
    }
    payouts: list[ProgressivePayout | EnvyBonus] = []
    for seat in settlement_order(seats):
        wager = wagers.get(seat)
        if wager is None:
            continue
        hand = qualifying.get(seat)
        if seat not in folded and hand is not None and hand in table:
            odds = table[hand]
            if odds is None:
                payouts.append(ProgressivePayout(seat, hand, meter.cents, True, meter.cents))
                meter = meter.reset_to(reset_cents)
            else:
                payouts.append(ProgressivePayout(seat, hand, odds * wager, False, meter.cents))
        # 649a.11(c)(5)(v): one bonus per other player's qualifying hand, never for one's own.
        for other in settlement_order(seats):
            other_hand = envy_hands.get(other)
            if other != seat and other_hand is not None:
                amount = ENVY_BONUS_CENTS[wager][other_hand]
                payouts.append(EnvyBonus(seat, other, other_hand, amount))
    return meter, payouts
