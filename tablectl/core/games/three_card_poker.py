"""Three Card Poker (58 Pa. Code 649a, 2012 text): the Progressive Payout Wager on the table.

The table game system carries the Progressive Payout Wager (649a.2(c), 649a.7(d)(4)): one
sensor and light per betting position and the lock-out button. The player's three cards form
the hand it is paid on (649a.12(e)); a folded player forfeits it but keeps Envy Bonus
eligibility (649a.11(b)(2)), and a folded hand is never shown (649a.11(c)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
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
from tablectl.rules.paytables import TCP, TCP_ENVY_CENTS
from tablectl.rules.progressive import settle_tcp_progressive
from tablectl.util.money import BasisPoints, Cents, Strict, dollars

NAME = "three-card-poker"
MAX_SEATS = 7  # 649a.2(a)
# 649a.12(e)(3): minimum rate of progression per paytable, in basis points.
MIN_RATE_BP = {"A": 1400, "B": 2000}
MIN_RESET_CENTS = 100_000  # 649a.12(e)(3): initial and reset amount at least $1,000
WAGER = TableWager(
    name="progressive",
    title="Progressive Payout Wager",
    lockout_rule="649a.2(c)(2)",
    count_rule="649a.8(b)",
)
# A Progressive Payout Wager follows an Ante or Pair Plus Wager, whose player is dealt a hand.
PLACED_AFTER = "649a.7(d)(4), 649a.8(d), 649a.10(b)"
DEAL_RULES = {
    Procedure.MANUAL_SHOE: "649a.8(d)",
    Procedure.HAND: "649a.9(b)",
    Procedure.AUTOMATED_SHOE: "649a.10(b)",
}


class TcpProgressiveConfig(Strict):
    """649a.12(e): the Progressive Payout Wager's paytable and meter."""

    wager: Cents
    paytable: Literal["A", "B"]
    rate_of_progression_percent: BasisPoints
    initial_amount: Cents
    reset_amount: Cents

    @field_validator("wager")
    @classmethod
    def _wager_has_envy_table(cls, cents: int) -> int:
        if cents not in TCP_ENVY_CENTS:
            raise ValueError(
                "the Progressive Payout Wager must be $1 or $5: 649a.12(e)(5) defines "
                "Envy Bonuses for those two amounts only"
            )
        return cents

    @field_validator("initial_amount", "reset_amount")
    @classmethod
    def _at_least_minimum(cls, cents: int) -> int:
        if cents < MIN_RESET_CENTS:
            raise ValueError(
                f"{dollars(cents)} is below the $1,000.00 minimum initial and reset amount "
                "of 649a.12(e)(3)"
            )
        return cents

    @model_validator(mode="after")
    def _rate_at_least_minimum(self) -> Self:
        minimum = MIN_RATE_BP[self.paytable]
        rate = self.rate_of_progression_percent
        if rate < minimum:
            raise ValueError(
                f"rate_of_progression_percent {Decimal(rate) / 100}% is below the "
                f"{Decimal(minimum) / 100}% minimum for paytable {self.paytable} "
                "(649a.12(e)(3))"
            )
        return self


class ThreeCardPokerConfig(Strict):
    name: Literal["three-card-poker"]
    dealing: Literal["manual-shoe", "hand", "automated-shoe"] = Field(
        default="automated-shoe", description="649a.8, 649a.9 or 649a.10"
    )
    progressive: TcpProgressiveConfig

    def table_game(self) -> ThreeCardPoker:
        return ThreeCardPoker(self)


# Not slotted: what it derives from its config is worked out once (cached_property; its
# equality and hash are its fields').
@dataclass(frozen=True)
class ThreeCardPoker:
    config: ThreeCardPokerConfig
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
        """649a.8(d), 649a.9(b): one card at a time, players from the dealer's left, then the
        dealer, until all have three; 649a.10(b): a stack of three to each, the dealer last."""
        procedure = procedure or self.procedure
        if procedure not in DEAL_RULES:
            raise ValueError(f"{procedure.value} is not a Three Card Poker dealing procedure")
        if procedure is Procedure.AUTOMATED_SHOE:
            steps = [*stacks(seats, 3), DealStep(To.DEALER, 3)]
        else:
            steps = round_robin(seats, 3, dealer=True, by_shoe=False)
        return DealPlan(procedure, DEAL_RULES[procedure], tuple(steps))

    def check_cards(
        self, cards: RoundCards, wagers: Mapping[int, int], folded: frozenset[int]
    ) -> None:
        check_hand_sizes(
            cards,
            wagers,
            folded,
            size=3,
            folded_may_show=False,
            requires=PLACED_AFTER,
            unseen="649a.11(c): a forfeited hand is collected with its wagers",
        )
        if cards.dealer and len(cards.dealer) != 3:
            raise ValueError("the dealer's hand is three cards")
        if cards.community:
            raise ValueError("Three Card Poker has no community cards")
        check_distinct(cards)

    def settle(
        self,
        meter: L | None,
        wagers: Mapping[int, int],
        cards: RoundCards,
        folded: frozenset[int],
        seats: int,
    ) -> TableSettlement[L]:
        """649a.11(c)(5): each Progressive Payout Wager in turn, then its Envy Bonuses.

        Refused (ValueError): a seat not of the table, a wager of no amount or of one with no
        Envy Bonus table, a wager whose seat shows no hand and did not fold."""
        if meter is None:
            raise ValueError("a Three Card Poker progressive table needs its meter")
        check_table_wagers(
            wagers,
            cards,
            folded,
            seats,
            seat_rule="649a.2(a), 649a.11(c)",
            placed_rule="649a.7(d)(4)",
            amounts=TCP_ENVY_CENTS,
            amount_rule="the Progressive Payout Wager is $1 or $5 (649a.12(e)(5))",
        )
        self.check_cards(cards, wagers, folded)
        p = self.config.progressive
        meter, payouts = settle_tcp_progressive(
            paytable=p.paytable,
            seats=seats,
            reset_cents=p.reset_amount,
            meter=meter,
            wagers=wagers,
            hands=cards.hands,
            folded=folded,
        )
        return progressive_settlement(
            meter,
            payouts,
            wagers,
            cards.hands,
            hit_rule="649a.12(e)",
            envy_rule="649a.12(e)(5)",
            unpaid=lambda seat: (
                (Outcome.FORFEITED, "649a.11(b)(2)")
                if seat in folded
                else (Outcome.LOST, "649a.12(e)")
            ),
        )

    def void_reasons(self) -> Mapping[str, str]:
        return void_reasons(TCP)
