"""What a game module provides to the one round core: data and small pure functions.

A game module says which wager passes through the table game system (sensor + lock-out),
how many seats, its deal plan for each dealing procedure, how the hand of that wager is
formed from the dealt cards, which irregularities void the round, and its meter rules. The
round core holds no game's rule text and never branches on a game's name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from tablectl.rules.cards import Card
from tablectl.rules.irregularities import Irregularity, NotApplicable, rule_on
from tablectl.rules.meters import MeterLedger
from tablectl.rules.progressive import EnvyBonus, ProgressivePayout
from tablectl.rules.settlement.common import SettlementRefused
from tablectl.util.money import dollars

L = TypeVar("L", bound=MeterLedger)

DECK_SIZE = 52


class Procedure(StrEnum):
    """The dealing procedures the text describes (649a.8-10, 653a.8-10, 643a.8-10)."""

    MANUAL_SHOE = "manual-shoe"
    HAND = "hand"
    AUTOMATED_SHOE = "automated-shoe"
    # 653a.10(g): a shoe that reshuffles may dispense the five community cards first.
    AUTOMATED_SHOE_COMMUNITY_FIRST = "automated-shoe-community-first"


class To(StrEnum):
    SEAT = "seat"
    DEALER = "dealer"
    COMMUNITY = "community"
    BURN = "burn"  # face down to the discard rack, never seen


@dataclass(frozen=True, slots=True)
class DealStep:
    """Cards dispensed together: one card by hand, or one stack from an automated shoe."""

    to: To
    cards: int
    seat: int | None = None
    by_shoe: bool = True  # False: the dealer deals these from the hand (653a.10(c))
    face_up: bool = False
    discard: int = 0  # the last cards of the stack go to the discard rack (643a.10(b))


@dataclass(frozen=True, slots=True)
class DealPlan:
    procedure: Procedure
    rule: str
    steps: tuple[DealStep, ...]

    @property
    def cards(self) -> int:
        return sum(step.cards for step in self.steps)


@dataclass(frozen=True, slots=True)
class RoundCards:
    """The cards of a round: each seat's, the dealer's, the community's; burned ones aside."""

    hands: Mapping[int, tuple[Card, ...]]
    dealer: tuple[Card, ...] = ()
    community: tuple[Card, ...] = ()
    burned: tuple[Card, ...] = ()

    def all_cards(self) -> list[Card]:
        return [
            *(c for h in self.hands.values() for c in h),
            *self.dealer,
            *self.community,
            *self.burned,
        ]


def form_hands(plan: DealPlan, dealt: Sequence[Card]) -> RoundCards:
    """Give each dealt card, in order, to whom the plan says (the shoe's reading)."""
    if len(dealt) != plan.cards:
        raise ValueError(f"the plan deals {plan.cards} cards; {len(dealt)} were read")
    if len(set(dealt)) != len(dealt):
        raise ValueError("a card was read twice: one deck is in play")
    hands: dict[int, list[Card]] = {}
    dealer: list[Card] = []
    community: list[Card] = []
    burned: list[Card] = []
    cards = iter(dealt)
    for step in plan.steps:
        taken = [next(cards) for _ in range(step.cards)]
        kept, dropped = taken[: step.cards - step.discard], taken[step.cards - step.discard :]
        burned += dropped
        if step.to is To.SEAT:
            assert step.seat is not None
            hands.setdefault(step.seat, []).extend(kept)
        elif step.to is To.DEALER:
            dealer += kept
        elif step.to is To.COMMUNITY:
            community += kept
        else:
            burned += kept
    return RoundCards(
        {seat: tuple(h) for seat, h in hands.items()},
        tuple(dealer),
        tuple(community),
        tuple(burned),
    )


def round_robin(
    seats: Sequence[int], rounds: int, *, dealer: bool, by_shoe: bool
) -> list[DealStep]:
    """One card at a time to each player, from the dealer's left, then the dealer; repeated."""
    steps = []
    for _ in range(rounds):
        steps += [DealStep(To.SEAT, 1, seat, by_shoe=by_shoe) for seat in sorted(seats)]
        if dealer:
            steps.append(DealStep(To.DEALER, 1, by_shoe=by_shoe))
    return steps


def stacks(seats: Sequence[int], size: int) -> list[DealStep]:
    """An automated shoe's stacks: the first to the player farthest to the dealer's left."""
    return [DealStep(To.SEAT, size, seat) for seat in sorted(seats)]


@dataclass(frozen=True, slots=True)
class TableWager:
    """The wager that passes through the table game system: sensor, light and lock-out."""

    name: str  # as journaled: progressive, bonus
    title: str  # as the text names it
    lockout_rule: str  # no wager recognised after "no more bets"
    count_rule: str  # the dealer checks the chips against the accepted count


@dataclass(frozen=True, slots=True)
class MeterRules:
    meter_id: str
    rate_bp: int
    initial_cents: int
    reset_cents: int


class Outcome(StrEnum):
    WON = "won"
    LOST = "lost"
    FORFEITED = "forfeited"


@dataclass(frozen=True, slots=True)
class WagerResult:
    seat: int
    outcome: Outcome
    paid_cents: int  # what the player receives; the wager was collected at lock-out
    hand: str | None
    rule: str


@dataclass(frozen=True, slots=True)
class Hit:
    """A progressive payout: held for a floorperson's validation before play goes on."""

    seat: int
    hand: str
    cards: tuple[Card, ...]
    amount_cents: int
    share: Fraction | None  # of the meter; None: paid at odds
    meter_before_cents: int
    meter_after_cents: int  # the meter this hit leaves (a 10 % share is not a reset)
    rule: str

    @property
    def paid_from_table_inventory(self) -> bool:
        # 649a.11(c)(5)(iv), 653a.11(k)(4): a share of the meter is not paid from the table.
        return self.share is None


@dataclass(frozen=True, slots=True)
class Envy:
    seat: int
    for_seat: int
    hand: str
    amount_cents: int
    rule: str


@dataclass(frozen=True, slots=True)
class TableSettlement(Generic[L]):
    """Every table-system wager's result, in settlement order, with hits and Envy Bonuses."""

    meter: L | None
    results: list[WagerResult] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    envy: list[Envy] = field(default_factory=list)


def progressive_settlement(
    meter: L,
    payouts: Sequence[ProgressivePayout | EnvyBonus],
    wagers: Mapping[int, int],
    formed: Mapping[int, tuple[Card, ...]],
    *,
    hit_rule: str,
    envy_rule: str,
    unpaid: Callable[[int], tuple[Outcome, str]],
) -> TableSettlement[L]:
    """A progressive wager's payouts as results, hits and Envy Bonuses, in settlement order.

    formed: the cards each seat's progressive hand was formed from (the evidence of a hit);
    unpaid(seat): the outcome and rule of a wager that won nothing.
    """
    out: TableSettlement[L] = TableSettlement(meter)
    won: dict[int, ProgressivePayout] = {}
    for payout in payouts:
        if isinstance(payout, ProgressivePayout):
            won[payout.seat] = payout
            out.hits.append(
                Hit(
                    payout.seat,
                    payout.hand.value,
                    formed[payout.seat],
                    payout.amount_cents,
                    payout.share,
                    payout.meter_before_cents,
                    payout.meter_after_cents,
                    hit_rule,
                )
            )
        else:
            out.envy.append(
                Envy(
                    payout.seat, payout.for_seat, payout.hand.value, payout.amount_cents, envy_rule
                )
            )
    for seat in sorted(wagers, reverse=True):  # from the dealer's right, counter-clockwise
        if seat in won:
            hit = won[seat]
            out.results.append(
                WagerResult(seat, Outcome.WON, hit.amount_cents, hit.hand.value, hit_rule)
            )
        else:
            outcome, rule = unpaid(seat)
            out.results.append(WagerResult(seat, outcome, 0, None, rule))
    return out


class TableGame(Protocol):
    """A game bound to one table's configuration: what the round core asks of it."""

    @property
    def name(self) -> str: ...

    @property
    def table_wager(self) -> TableWager: ...

    @property
    def wager_cents(self) -> int: ...

    @property
    def meter(self) -> MeterRules | None: ...

    @property
    def procedure(self) -> Procedure: ...

    def deal_plan(self, seats: Sequence[int], procedure: Procedure | None = None) -> DealPlan:
        """Who receives how many cards, in which order, for the seats in play."""
        ...

    def check_cards(
        self, cards: RoundCards, wagers: Mapping[int, int], folded: frozenset[int]
    ) -> None:
        """Raise ValueError saying what is missing or wrong in the cards shown."""
        ...

    def settle(
        self,
        meter: L | None,
        wagers: Mapping[int, int],
        cards: RoundCards,
        folded: frozenset[int],
        seats: int,
    ) -> TableSettlement[L]:
        """Settle every table-system wager in the text's order (pure). Refused (ValueError):
        cards that check_cards refuses, checked before the wagers are settled."""
        ...

    def void_reasons(self) -> Mapping[str, str]:
        """The irregularities a dealer may void a round for, each with its rule."""
        ...


@functools.cache
def void_reasons(chapter: str, *, face_up_cards: int = 2) -> Mapping[str, str]:
    """Irregularities of the chapter whose ruling voids the round (649a.13, 653a.13, 643a.13).

    Worked out once per chapter (the core asks at every card a shoe reads), and read-only:
    every caller shares it."""
    reasons = {}
    for what in Irregularity:
        try:
            ruling = rule_on(chapter, what, face_up_cards=face_up_cards)
        except NotApplicable:
            continue
        if ruling.void_round:
            reasons[what.value] = ruling.rule
    return MappingProxyType(reasons)


def check_distinct(cards: RoundCards) -> None:
    every = cards.all_cards()
    if len(set(every)) != len(every):
        dupes = sorted({str(c) for c in every if every.count(c) > 1})
        raise ValueError(f"{', '.join(dupes)} shown twice: one deck is in play")


def check_table_wagers(
    wagers: Mapping[int, int],
    cards: RoundCards,
    folded: frozenset[int],
    seats: int,
    *,
    seat_rule: str,
    placed_rule: str,
    amounts: Mapping[int, object] | None = None,
    amount_rule: str = "",
) -> None:
    """What a game's settle refuses first, so that no wager goes without its result: a seat
    that is not one of the table's betting positions (seat_rule), and an amount that is no
    chip placed (placed_rule) or, with `amounts`, one the paytable has no row for."""
    for seat in sorted({*wagers, *cards.hands, *folded}):
        if isinstance(seat, bool) or not isinstance(seat, int) or not 1 <= seat <= seats:
            raise SettlementRefused(
                f"seat {seat!r}: the table has betting positions 1 to {seats} ({seat_rule})"
            )
    for seat, cents in sorted(wagers.items()):
        if isinstance(cents, bool) or not isinstance(cents, int) or cents <= 0:
            raise SettlementRefused(
                f"seat {seat}: a wager of {cents!r} cents: a wager is a chip placed on the "
                f"wagering device, an amount above nothing ({placed_rule})"
            )
        if amounts is not None and cents not in amounts:
            raise SettlementRefused(f"seat {seat}: a wager of {dollars(cents)}: {amount_rule}")


def check_hand_sizes(
    cards: RoundCards,
    wagers: Mapping[int, int],
    folded: frozenset[int],
    *,
    size: int,
    folded_may_show: bool,
    requires: str = "",
    unseen: str = "",
) -> None:
    """Every wager's seat shows a hand of `size` cards or folds (requires: the rule that
    deals a hand to the player of such a wager; unseen: the one that collects a fold's cards
    unseen, when not folded_may_show)."""
    both = folded & set(cards.hands)
    if both and not folded_may_show:
        why = f" ({unseen})" if unseen else ""
        raise ValueError(f"seats {sorted(both)} cannot both fold and show a hand{why}")
    for seat, hand in cards.hands.items():
        if len(hand) != size:
            raise ValueError(f"seat {seat}: a hand is {size} cards, not {len(hand)}")
    missing = set(wagers) - set(cards.hands) - folded
    if missing:
        why = f" ({requires})" if requires else ""
        raise ValueError(
            f"seats {sorted(missing)} have table-system wagers: give a hand or a fold{why}"
        )
