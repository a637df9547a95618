"""Progressive payouts with Envy Bonuses, settled in turn against a meter ledger. Pure.

Hits are paid in turn, each at the meter as it stands then (649a.12(e)(4), 653a.12(d)(4)).
The meter itself is a ledger (tablectl.rules.meters): settlement asks it to pay a share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from tablectl.rules.cards import Card
from tablectl.rules.hands import three_card_classes
from tablectl.rules.meters import MeterLedger
from tablectl.rules.paytables import PAYTABLES, TCP, TCP_ENVY_CENTS, Hand, PayKind, Paytable

L = TypeVar("L", bound=MeterLedger)

# 649a.12(e)(3): minimum rate of progression per paytable, in basis points.
MIN_RATE_BP = {"A": 1400, "B": 2000}
MIN_RESET_CENTS = 100_000  # 649a.12(e)(3): initial and reset amount at least $1,000
PROGRESSIVE_WAGERS_CENTS = tuple(TCP_ENVY_CENTS)  # $1 and $5 (649a.12(e)(5))


@dataclass(frozen=True, slots=True)
class ProgressivePayout:
    seat: int
    hand: Hand
    amount_cents: int  # what the player receives (the wager was collected at lock-out)
    share: Fraction | None  # of the meter (not paid from the table inventory), or None: odds
    meter_before_cents: int
    meter_after_cents: int

    @property
    def from_meter(self) -> bool:
        return self.share is not None


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
    meter: L,
    wagers: Mapping[int, int],
    hands: Mapping[int, Sequence[Hand]],
    folded: frozenset[int] = frozenset(),
    fold_forfeits: bool = True,
) -> tuple[L, list[ProgressivePayout | EnvyBonus]]:
    """Pay each seat in turn at the meter as it stands then, with Envy Bonuses.

    hands: each dealt hand's classes, highest first. A folded hand is never shown, so it
    earns no one an Envy Bonus (649a.11(c)). A folded Three Card Poker player forfeits the
    Progressive Payout Wager but keeps Envy Bonus eligibility (649a.11(b)(2)): fold_forfeits.
    """
    any_envy = {h for table in envy_cents.values() for h in table}
    envy_hands: dict[int, Hand] = {}
    for seat, classes in hands.items():
        qualifying = [h for h in classes if h in any_envy]
        if qualifying and seat not in folded:
            envy_hands[seat] = qualifying[0]  # its highest
    order = settlement_order(seats)
    qualified = [seat for seat in order if seat in envy_hands]  # in settlement order
    payouts: list[ProgressivePayout | EnvyBonus] = []
    for seat in order:
        wager = wagers.get(seat)
        if wager is None:
            continue
        forfeited = fold_forfeits and seat in folded
        won = None if forfeited else paytable.pay_for(list(hands.get(seat, [])))
        if won is not None:
            hand, pay = won
            before = meter.cents
            if pay.kind is PayKind.METER:
                meter, amount = meter.pay_share(pay.odds, reset_cents)
                payouts.append(ProgressivePayout(seat, hand, amount, pay.odds, before, meter.cents))
            else:
                amount = wager * pay.odds.numerator // pay.odds.denominator
                payouts.append(ProgressivePayout(seat, hand, amount, None, before, before))
        # One bonus per other player's qualifying hand, never for one's own (649a.11(c)(5)(v)).
        for other in qualified:
            if other != seat:
                amount = envy_cents[wager][envy_hands[other]]
                payouts.append(EnvyBonus(seat, other, envy_hands[other], amount))
    return meter, payouts


def settle_tcp_progressive(
    *,
    paytable: str,
    seats: int,
    reset_cents: int,
    meter: L,
    wagers: Mapping[int, int],
    hands: Mapping[int, tuple[Card, ...]],
    folded: frozenset[int],
) -> tuple[L, list[ProgressivePayout | EnvyBonus]]:
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
