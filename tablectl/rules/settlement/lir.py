"""Let It Ride settlement (643a.11, 643a.12, 2011 text). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from tablectl.rules.cards import Card
from tablectl.rules.hands import five_card_classes, three_card_classes
from tablectl.rules.paytables import LIR, PAYTABLES
from tablectl.rules.settlement.common import (
    BEST_OF_EACH_FIVE_CARD_CATEGORY,
    Outcome,
    Settlement,
    SettlementRefused,
    WagerResult,
    apply_limit,
    check_amounts,
    check_cards,
    check_payout_limit,
    check_seats,
    in_settlement_order,
    minimum_payout_limit_cents,
    offered,
    paytable_wager,
    won_cents,
)

# 643a.2 (the layout) is not in the text carried here: the table's positions, settled in turn.
SEAT_RULE = "643a.11(f)"


@dataclass(frozen=True, slots=True)
class LirSeat:
    seat: int
    cards: tuple[Card, ...]
    bet: int  # each of the three equal Let It Ride Poker Wagers (643a.7(d))
    withdraw_bet_1: bool = False  # 643a.11(b)
    withdraw_bet_2: bool = False  # 643a.11(d)
    bonus: int = 0
    three_card_bonus: int = 0


@dataclass(frozen=True, slots=True)
class LirRules:
    seats: int
    base: str = "A"
    bonus: str | None = None
    three_card_bonus: str | None = None
    # 643a.12(d): at least lir_minimum_payout_limit_cents, checked here; needs the minimum.
    payout_limit_cents: int | None = None
    minimum_wager_cents: int | None = None  # the table minimum of each Let It Ride Poker Wager

    def __post_init__(self) -> None:
        if self.seats < 1:
            raise ValueError(f"seats {self.seats}: a table has at least one betting position")
        check_payout_limit(
            self.payout_limit_cents,
            self.minimum_wager_cents,
            partial(lir_minimum_payout_limit_cents, self.base),
            "643a.12(d)",
            "the three Let It Ride Poker Wagers at the minimum, all riding",
        )


LIR_LIMITED_WAGERS = {"bet-1", "bet-2", "bet-3"}


def lir_minimum_payout_limit_cents(base: str, minimum_wager_cents: int) -> int:
    """643a.12(d): the least payout limit a table may set, in cents.

    The greater of $50,000 and the most one patron can win per round betting the minimum: the
    three Let It Ride Poker Wagers (643a.7(d)) at the minimum, none withdrawn, paid by the
    643a.12(a) paytable; the Bonus and Three Card Bonus are not limited, so they do not count.
    """
    table = PAYTABLES[LIR, "base", base]

    def most_won(m: int) -> int:
        return max(3 * (won_cents(table, m, hand) or 0) for hand in BEST_OF_EACH_FIVE_CARD_CATEGORY)

    return minimum_payout_limit_cents(most_won, minimum_wager_cents)


def settle_let_it_ride(
    rules: LirRules, players: Sequence[LirSeat], community: tuple[Card, ...]
) -> Settlement:
    """Every wager placed gets one result, seat by seat from the dealer's right, in 643a.11(f)(3)'s
    order: the three Let It Ride Poker Wagers, then the Bonus and the Three Card Bonus."""
    check_seats(rules.seats, players, SEAT_RULE)
    if len(community) != 2 or any(len(p.cards) != 3 for p in players):
        raise SettlementRefused(
            "Let It Ride: three cards each and two community cards (643a.8(d), 643a.10(b))"
        )
    check_cards([community, *(p.cards for p in players)], "one deck of 52 cards, 643a.8(g)")
    for p in players:
        # 643a.7(d)-(f) define the wagers (643a.12(d) cites them); their text is not carried.
        amounts = {"bet": p.bet, "bonus": p.bonus, "three-card-bonus": p.three_card_bonus}
        check_amounts(p.seat, amounts, "643a.7(d)-(f)")
        if not p.bet:
            # The Bonus and Three Card Bonus are settled on the player's cards (643a.11(f)).
            side = [name for name in ("bonus", "three-card-bonus") if amounts[name]]
            placed = f"its {' and '.join(side)} wager has no hand: " if side else ""
            raise SettlementRefused(
                f"seat {p.seat}: {placed}cards go only to players who placed the three Let It "
                "Ride Poker Wagers (643a.8(d))"
            )
        if p.bonus:
            offered(rules.bonus, p.seat, "bonus", "643a.12(b)")
        if p.three_card_bonus:
            offered(rules.three_card_bonus, p.seat, "three-card-bonus", "643a.12(c)")
    base = PAYTABLES[LIR, "base", rules.base]
    out = Settlement()
    for p in in_settlement_order(rules.seats, players):
        seat = p.seat
        classes = five_card_classes([*p.cards, *community])
        seat_results: list[WagerResult] = []
        for name, withdrawn in (
            ("bet-1", p.withdraw_bet_1),
            ("bet-2", p.withdraw_bet_2),
            ("bet-3", False),
        ):
            if withdrawn:
                seat_results.append(WagerResult(seat, name, p.bet, Outcome.WITHDRAWN, 0, p.bet))
            else:
                seat_results.append(paytable_wager(seat, name, p.bet, base, classes))
        apply_limit(seat_results, LIR_LIMITED_WAGERS, rules.payout_limit_cents)
        if p.bonus and rules.bonus:
            table = PAYTABLES[LIR, "bonus", rules.bonus]
            seat_results.append(paytable_wager(seat, "bonus", p.bonus, table, classes))
        if p.three_card_bonus and rules.three_card_bonus:  # on the player's three cards
            table = PAYTABLES[LIR, "three-card-bonus", rules.three_card_bonus]
            seat_results.append(
                paytable_wager(
                    seat, "three-card-bonus", p.three_card_bonus, table, three_card_classes(p.cards)
                )
            )
        out.results += seat_results
    return out
