"""Let It Ride (58 Pa. Code 643a, 2011 text): the Let It Ride Bonus Wager on the table.

643a.8(b): before any card is dealt the dealer announces "no more bets" and uses the table
game system to prevent further Bonus Wagers, collects them into the table inventory and checks
the chips against the count the system accepted. The Bonus is paid the fixed amounts of
643a.12(b) on the player's three cards and the two community cards (643a.11(f)); it has no
meter, and the text sets no floorperson validation for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from tablectl.core.games.base import (
    DealPlan,
    DealStep,
    L,
    Outcome,
    Procedure,
    RoundCards,
    TableSettlement,
    TableWager,
    To,
    WagerResult,
    check_distinct,
    check_hand_sizes,
    check_table_wagers,
    round_robin,
    stacks,
    void_reasons,
)
from tablectl.rules.hands import five_card_classes
from tablectl.rules.paytables import LIR, PAYTABLES
from tablectl.rules.progressive import settlement_order
from tablectl.rules.settlement import lir_minimum_payout_limit_cents
from tablectl.rules.settlement.common import check_payout_limit
from tablectl.util.money import Cents, Strict

NAME = "let-it-ride"
MAX_SEATS = 7
WAGER = TableWager(
    name="bonus",
    title="Let It Ride Bonus Wager",
    lockout_rule="643a.8(b)",
    count_rule="643a.8(b)",
)
DEAL_RULES = {
    Procedure.MANUAL_SHOE: "643a.8(d)",
    Procedure.HAND: "643a.9(b)",
    Procedure.AUTOMATED_SHOE: "643a.10(b)",
}


class LirBonusConfig(Strict):
    """643a.12(b): the Bonus paytable; its amounts are for a $1 wager (docs/rules-engine.md)."""

    wager: Cents
    paytable: Literal["A", "B", "C"]

    @field_validator("wager")
    @classmethod
    def _whole_dollars(cls, cents: int) -> int:
        if cents < 100 or cents % 100:
            raise ValueError(
                "the Let It Ride Bonus Wager is whole dollars: the amounts of 643a.12(b) are "
                "for a $1 wager and paid in proportion"
            )
        return cents


class LetItRideConfig(Strict):
    name: Literal["let-it-ride"]
    dealing: Literal["manual-shoe", "hand", "automated-shoe"] = "automated-shoe"
    paytable: Literal["A", "B"] = Field(default="A", description="643a.12(a)")
    minimum_wager: Cents | None = Field(default=None, description="each Let It Ride Poker Wager")
    payout_limit: Cents | None = Field(default=None, description="643a.12(d), per hand")
    bonus: LirBonusConfig

    @model_validator(mode="after")
    def _payout_limit_at_least_the_minimum(self) -> Self:
        check_payout_limit(
            self.payout_limit,
            self.minimum_wager,
            partial(lir_minimum_payout_limit_cents, self.paytable),
            "643a.12(d)",
            "three Let It Ride Poker Wagers at the minimum",
        )
        return self

    def table_game(self) -> LetItRide:
        return LetItRide(self)


# Not slotted: what it derives from its config is worked out once (cached_property; its
# equality and hash are its fields').
@dataclass(frozen=True)
class LetItRide:
    config: LetItRideConfig
    name: str = NAME
    table_wager: TableWager = WAGER

    @property
    def wager_cents(self) -> int:
        return self.config.bonus.wager

    @property
    def meter(self) -> None:
        return None

    @cached_property
    def procedure(self) -> Procedure:
        return Procedure(self.config.dealing)

    def deal_plan(self, seats: Sequence[int], procedure: Procedure | None = None) -> DealPlan:
        procedure = procedure or self.procedure
        if procedure not in DEAL_RULES:
            raise ValueError(f"{procedure.value} is not a Let It Ride dealing procedure")
        if procedure is Procedure.AUTOMATED_SHOE:
            # 643a.10(b): a stack of three to each player, then three to the community area,
            # whose card to the dealer's left goes to the discard rack unseen.
            steps = [*stacks(seats, 3), DealStep(To.COMMUNITY, 3, discard=1)]
        else:
            # 643a.8(d), 643a.9(b): a card to each player, one to the community area, a second
            # to each player, a second community card, a third to each player.
            one = round_robin(seats, 1, dealer=False, by_shoe=False)
            community = DealStep(To.COMMUNITY, 1, by_shoe=False)
            steps = [*one, community, *one, community, *one]
        return DealPlan(procedure, DEAL_RULES[procedure], tuple(steps))

    def check_cards(
        self, cards: RoundCards, wagers: Mapping[int, int], folded: frozenset[int]
    ) -> None:
        if folded:
            raise ValueError("Let It Ride has no fold: Bet 3 always stands (643a.11)")
        # The Bonus is settled on the hand of a player who placed the three Let It Ride Poker
        # Wagers, the only players dealt one.
        check_hand_sizes(
            cards, wagers, folded, size=3, folded_may_show=False, requires="643a.8(d), 643a.11(f)"
        )
        if len(cards.community) != 2:
            raise ValueError("give the two community cards (643a.11(f)(1))")
        if cards.dealer:
            raise ValueError("Let It Ride has no dealer's hand")
        check_distinct(cards)

    def settle(
        self,
        meter: L | None,
        wagers: Mapping[int, int],
        cards: RoundCards,
        folded: frozenset[int],
        seats: int,
    ) -> TableSettlement[L]:
        """643a.11(f)(3): from the dealer's right, each Bonus Wager on the five-card hand.

        Refused (ValueError): a seat not of the table, a wager of no amount, a wager whose
        seat shows no hand."""
        check_table_wagers(
            wagers, cards, folded, seats, seat_rule="643a.11(f)", placed_rule="643a.8(b)"
        )
        self.check_cards(cards, wagers, folded)
        table = PAYTABLES[LIR, "bonus", self.config.bonus.paytable]
        out: TableSettlement[L] = TableSettlement(meter)
        for seat in settlement_order(seats):
            if seat not in wagers:
                continue
            won = table.pay_for(five_card_classes([*cards.hands[seat], *cards.community]))
            if won is None:
                out.results.append(WagerResult(seat, Outcome.LOST, 0, None, "643a.12(b)"))
                continue
            hand, pay = won
            # The wager was collected at "no more bets" (643a.8(b)): the amount is all the
            # player receives, for a $1 wager and in proportion to a larger one.
            received = pay.paid_cents(wagers[seat])
            out.results.append(WagerResult(seat, Outcome.WON, received, hand.value, "643a.12(b)"))
        return out

    def void_reasons(self) -> Mapping[str, str]:
        return void_reasons(LIR)
