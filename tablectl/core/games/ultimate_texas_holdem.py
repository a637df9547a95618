"""Ultimate Texas Hold 'Em (58 Pa. Code 653a, 2012 text; 653a.11 as amended in 2019).

The table game system carries the Progressive Payout Wager (653a.2(c), 653a.7(d)(3)). Its
hand is the best five of the player's two cards and the five community cards under the 2012
text (653a.11(j)), or of the player's two cards and the three-card Flop under the 2019 text
(653a.11(k)); the table's Rules Submission chooses (`text`). A hit paid as a share of the
meter (100 % royal flush, 10 % straight flush) is not paid from the table inventory.
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
    MeterRules,
    Outcome,
    Procedure,
    RoundCards,
    TableSettlement,
    TableWager,
    To,
    check_distinct,
    check_hand_sizes,
    check_table_wagers,
    progressive_settlement,
    round_robin,
    stacks,
    void_reasons,
)
from tablectl.rules.hands import five_card_classes
from tablectl.rules.paytables import PAYTABLES, UTH, UTH_ENVY_CENTS
from tablectl.rules.progressive import settle_progressive
from tablectl.rules.settlement import uth_minimum_payout_limit_cents
from tablectl.rules.settlement.common import check_payout_limit
from tablectl.util.money import BasisPoints, Cents, Strict, dollars

NAME = "ultimate-texas-holdem"
MAX_SEATS = 6  # 653a.2(a)
MIN_RESET_CENTS = 1_000_000  # 653a.12(d)(3): initial and reset amount at least $10,000
WAGER = TableWager(
    name="progressive",
    title="Progressive Payout Wager",
    lockout_rule="653a.2(c)(2)",
    count_rule="653a.8(b)",
)
DEAL_RULES = {
    Procedure.MANUAL_SHOE: "653a.8(d)-(e), 653a.11(c), (e)",
    Procedure.HAND: "653a.9(b)-(c), 653a.11(c), (e)",
    Procedure.AUTOMATED_SHOE: "653a.10(b)-(c), 653a.11(c), (e)",
    Procedure.AUTOMATED_SHOE_COMMUNITY_FIRST: "653a.10(g)",
}
# A Progressive Payout Wager follows the Ante and Blind, whose player is dealt a hand.
PLACED_AFTER = "653a.7(d)(3), 653a.8(d), 653a.10(b)"
# Which section settles the progressive, by the text the table runs.
PROGRESSIVE_RULE = {"2012": "653a.11(j)", "2019": "653a.11(k)"}


class UthProgressiveConfig(Strict):
    """653a.12(d): the Progressive Payout Wager's meter."""

    wager: Cents
    rate_of_progression_percent: BasisPoints
    initial_amount: Cents
    reset_amount: Cents

    @field_validator("wager")
    @classmethod
    def _wager_has_envy_table(cls, cents: int) -> int:
        if cents not in UTH_ENVY_CENTS:
            raise ValueError(
                "the Progressive Payout Wager must be $1 or $5: 653a.12(d)(5) defines "
                "Envy Bonuses for those two amounts only"
            )
        return cents

    @field_validator("rate_of_progression_percent")
    @classmethod
    def _rate_positive(cls, bp: int) -> int:
        if bp <= 0:
            raise ValueError(
                "a rate of progression above 0% must be stated in the Rules Submission "
                "(653a.12(d)(3))"
            )
        return bp

    @field_validator("initial_amount", "reset_amount")
    @classmethod
    def _at_least_minimum(cls, cents: int) -> int:
        if cents < MIN_RESET_CENTS:
            raise ValueError(
                f"{dollars(cents)} is below the $10,000.00 minimum initial and reset amount "
                "of 653a.12(d)(3)"
            )
        return cents


class UltimateTexasHoldemConfig(Strict):
    name: Literal["ultimate-texas-holdem"]
    text: Literal["2012", "2019"] = Field(
        default="2019",
        description="653a.11 as published in 2012 (progressive on the best five of seven) "
        "or as amended in 2019 (on the player's two cards and the Flop)",
    )
    dealing: Literal["manual-shoe", "hand", "automated-shoe", "automated-shoe-community-first"] = (
        "automated-shoe"
    )
    blind_paytable: Literal["A", "B"] = Field(default="A", description="653a.12(b)")
    trips_paytable: Literal["A", "B", "C", "D"] = Field(default="A", description="653a.12(c)")
    minimum_wager: Cents | None = Field(default=None, description="the table's minimum Ante")
    payout_limit: Cents | None = Field(default=None, description="653a.12(e), per hand")
    progressive: UthProgressiveConfig

    @model_validator(mode="after")
    def _payout_limit_at_least_the_minimum(self) -> Self:
        check_payout_limit(
            self.payout_limit,
            self.minimum_wager,
            partial(uth_minimum_payout_limit_cents, self.blind_paytable, self.trips_paytable),
            "653a.12(e)",
            "Ante, Blind and Trips at the minimum, the Play at four times the Ante",
        )
        return self

    def table_game(self) -> UltimateTexasHoldem:
        return UltimateTexasHoldem(self)


def _community_steps(by_shoe: bool) -> list[DealStep]:
    """653a.11(c), (e): burn, the Flop face up; burn, the last two face up."""
    return [
        DealStep(To.BURN, 1, by_shoe=by_shoe),
        DealStep(To.COMMUNITY, 3, by_shoe=by_shoe, face_up=True),
        DealStep(To.BURN, 1, by_shoe=by_shoe),
        DealStep(To.COMMUNITY, 2, by_shoe=by_shoe, face_up=True),
    ]


# Not slotted: what it derives from its config is worked out once (cached_property; its
# equality and hash are its fields').
@dataclass(frozen=True)
class UltimateTexasHoldem:
    config: UltimateTexasHoldemConfig
    name: str = NAME
    table_wager: TableWager = WAGER

    @property
    def wager_cents(self) -> int:
        return self.config.progressive.wager

    @cached_property
    def meter(self) -> MeterRules:
        p = self.config.progressive
        return MeterRules(
            "progressive", p.rate_of_progression_percent, p.initial_amount, p.reset_amount
        )

    @cached_property
    def procedure(self) -> Procedure:
        return Procedure(self.config.dealing)

    def deal_plan(self, seats: Sequence[int], procedure: Procedure | None = None) -> DealPlan:
        procedure = procedure or self.procedure
        if procedure is Procedure.AUTOMATED_SHOE:
            # 653a.10(b)-(c): stacks of two, the dealer's last; the dealer deals the
            # community cards from the hand.
            steps = [*stacks(seats, 2), DealStep(To.DEALER, 2), *_community_steps(False)]
        elif procedure is Procedure.AUTOMATED_SHOE_COMMUNITY_FIRST:
            steps = [DealStep(To.COMMUNITY, 5), *stacks(seats, 2), DealStep(To.DEALER, 2)]
        else:
            # 653a.8(d), 653a.9(b): one at a time, the dealer's under a cover card.
            steps = [*round_robin(seats, 2, dealer=True, by_shoe=False), *_community_steps(False)]
        return DealPlan(procedure, DEAL_RULES[procedure], tuple(steps))

    def check_cards(
        self, cards: RoundCards, wagers: Mapping[int, int], folded: frozenset[int]
    ) -> None:
        # 653a.11(f)(2)(i): a folded player's cards may stay on the table (Trips, Six Card
        # Bonus pending), so a fold may show its hand; without it the wager cannot win.
        check_hand_sizes(cards, wagers, folded, size=2, folded_may_show=True, requires=PLACED_AFTER)
        need = 5 if self.config.text == "2012" else 3
        if len(cards.community) not in ((5,) if need == 5 else (3, 5)):
            what = (
                "the five community cards"
                if need == 5
                else "the Flop (or all five community cards)"
            )
            rule = PROGRESSIVE_RULE[self.config.text]
            raise ValueError(f"give {what}: the progressive is settled on them ({rule})")
        if cards.dealer and len(cards.dealer) != 2:
            raise ValueError("the dealer's hand is two cards")
        check_distinct(cards)

    def settle(
        self,
        meter: L | None,
        wagers: Mapping[int, int],
        cards: RoundCards,
        folded: frozenset[int],
        seats: int,
    ) -> TableSettlement[L]:
        """653a.11(k) (2019) or (j) (2012): each Progressive Payout Wager in turn, then its
        Envy Bonuses.

        Refused (ValueError): a seat not of the table, a wager of no amount or of one with no
        Envy Bonus table, a wager whose seat shows no hand and did not fold."""
        if meter is None:
            raise ValueError("an Ultimate Texas Hold 'Em progressive table needs its meter")
        check_table_wagers(
            wagers,
            cards,
            folded,
            seats,
            seat_rule="653a.2(a), 653a.11(h)",
            placed_rule="653a.7(d)(3)",
            amounts=UTH_ENVY_CENTS,
            amount_rule="the Progressive Payout Wager is $1 or $5 (653a.12(d)(5))",
        )
        self.check_cards(cards, wagers, folded)
        p = self.config.progressive
        rule = PROGRESSIVE_RULE[self.config.text]
        flop_only = self.config.text == "2019"
        formed = {
            seat: [*hole, *(cards.community[:3] if flop_only else cards.community)]
            for seat, hole in cards.hands.items()
        }
        meter, payouts = settle_progressive(
            paytable=PAYTABLES[UTH, "progressive", "A"],
            envy_cents=UTH_ENVY_CENTS,
            seats=seats,
            reset_cents=p.reset_amount,
            meter=meter,
            wagers=wagers,
            hands={seat: five_card_classes(hand) for seat, hand in formed.items()},
            folded=folded,
            fold_forfeits=False,
        )
        return progressive_settlement(
            meter,
            payouts,
            wagers,
            {seat: tuple(hand) for seat, hand in formed.items()},
            hit_rule="653a.12(d)",
            envy_rule="653a.12(d)(5)",
            # A fold without its cards kept (653a.11(f)(2)(ii)) cannot win.
            unpaid=lambda seat: (
                (Outcome.LOST, rule) if seat in cards.hands else (Outcome.LOST, "653a.11(f)(2)(ii)")
            ),
        )

    def void_reasons(self) -> Mapping[str, str]:
        return void_reasons(UTH)
