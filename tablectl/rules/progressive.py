"""Progressive meters and progressive payouts with Envy Bonuses. Pure.

Money is integer cents. A contribution is wager x rate of progression; the part below one
cent is carried forward in ten-thousandths of a cent, so no contribution is ever rounded away.
Hits are paid in turn, each at the meter as it stands then (649a.12(e)(4), 653a.12(d)(4)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from tablectl.rules.cards import Card
from tablectl.rules.hands import three_card_classes
from tablectl.rules.paytables import PAYTABLES, TCP, TCP_ENVY_CENTS, Hand, PayKind, Paytable

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


# 649a.12(e)(3): minimum rate of progression per paytable, in basis points.
MIN_RATE_BP = {"A": 1400, "B": 2000}
MIN_RESET_CENTS = 100_000  # 649a.12(e)(3): initial and reset amount at least $1,000
PROGRESSIVE_WAGERS_CENTS = tuple(TCP_ENVY_CENTS)  # $1 and $5 (649a.12(e)(5))


@dataclass(frozen=True, slots=True)
class ProgressivePayout:
    seat: int
    hand: Hand
    amount_cents: int  # what the player receives (the wager was collected at lock-out)
    from_meter: bool  # a share of the meter: not paid from the table inventory
    meter_before_cents: int


@dataclass(frozen=True, slots=True)
class EnvyBonus:
    seat: int  # the player receiving the bonus
    for_seat: int  # the other player holding the Envy Bonus Qualifying Hand
    hand: Hand
    amount_cents: int


def settlement_order(seats: int) -> list[int]:
    """649a.11(c), 653a.11(h): from the player farthest to the dealer's right, counter-clockwise.

    Seat 1 is farthest to the dealer's left (dealt first, 649a.8(d)), so that is N, N-1, ... 1.
    """
    return list(range(seats, 0, -1))


def settle_progressive(
    *,
    paytable: Paytable,
    envy_cents: Mapping[int, Mapping[Hand, int]],
    seats: int,
    reset_cents: int,
    meter: Meter,
    wagers: Mapping[int, int],
    hands: Mapping[int, Sequence[Hand]],
    folded: frozenset[int] = frozenset(),
) -> tuple[Meter, list[ProgressivePayout | EnvyBonus]]:
    """Pay each seat in turn at the meter as it stands then, with Envy Bonuses.

    hands: each shown hand's classes, highest first. A folded Three Card Poker player
    forfeits the Progressive Payout Wager but keeps Envy Bonus eligibility (649a.11(b)(2));
    a folded hand is not shown, so it earns no one an Envy Bonus.
    """
    any_envy = {h for table in envy_cents.values() for h in table}
    envy_hands = {
        seat: next(h for h in classes if h in any_envy)
        for seat, classes in hands.items()
        if any(h in any_envy for h in classes)
    }
    payouts: list[ProgressivePayout | EnvyBonus] = []
    for seat in settlement_order(seats):
        wager = wagers.get(seat)
        if wager is None:
            continue
        won = None if seat in folded else paytable.pay_for(list(hands.get(seat, [])))
        if won is not None:
            hand, pay = won
            if pay.kind is PayKind.METER:
                # A share of the meter; a 100% hit restarts it at the reset amount.
                amount = meter.cents * pay.odds.numerator // pay.odds.denominator
                payouts.append(ProgressivePayout(seat, hand, amount, True, meter.cents))
                if pay.odds == 1:
                    meter = meter.reset_to(reset_cents)
                else:
                    meter = meter.add_units(-amount * CARRY_DENOMINATOR)
            else:
                amount = wager * pay.odds.numerator // pay.odds.denominator
                payouts.append(ProgressivePayout(seat, hand, amount, False, meter.cents))
        # One bonus per other player's qualifying hand, never for one's own (649a.11(c)(5)(v)).
        for other in settlement_order(seats):
            other_hand = envy_hands.get(other)
            if other != seat and other_hand is not None:
                amount = envy_cents[wager][other_hand]
                payouts.append(EnvyBonus(seat, other, other_hand, amount))
    return meter, payouts


def settle_tcp_progressive(
    *,
    paytable: str,
    seats: int,
    reset_cents: int,
    meter: Meter,
    wagers: Mapping[int, int],
    hands: Mapping[int, tuple[Card, ...]],
    folded: frozenset[int],
) -> tuple[Meter, list[ProgressivePayout | EnvyBonus]]:
    """Three Card Poker's Progressive Payout Wager (649a.12(e)) on the players' three cards."""
    return settle_progressive(
        paytable=PAYTABLES[TCP, "progressive", paytable],
        envy_cents=TCP_ENVY_CENTS,
        seats=seats,
        reset_cents=reset_cents,
        meter=meter,
        wagers=wagers,
        hands={seat: three_card_classes(cards) for seat, cards in hands.items()},
        folded=folded,
    )
