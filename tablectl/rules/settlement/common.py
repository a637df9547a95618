"""What every game's settlement shares: results, the settlement order, payout arithmetic. Pure.

Seats are settled counter-clockwise from the dealer's right (seat N down to 1: 649a.11(c),
653a.11(h), 643a.11(f)); within a seat, wagers in the order the section lists them. Each
result carries `net_cents` (what the player gains or loses on that wager) and `paid_cents`
(what the dealer hands over, the returned wager included). Fractions of a cent from odds
such as 3 to 2 are not paid (rounded down).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from tablectl.rules.cards import Card
from tablectl.rules.hands import five_card_classes_of_value
from tablectl.rules.meters import LocalMeter
from tablectl.rules.paytables import Hand, Pay, PayKind, Paytable
from tablectl.rules.poker import CATEGORY_SHIFT, FiveCardCategory
from tablectl.rules.progressive import EnvyBonus, ProgressivePayout, settlement_order
from tablectl.util.money import dollars

T = TypeVar("T")


class Outcome(StrEnum):
    WIN = "win"
    LOSE = "lose"
    PUSH = "push"  # returned: a tie, or a Blind below the paying hands
    FORFEIT = "forfeit"  # the player folded or withdrew nothing: collected
    WITHDRAWN = "withdrawn"  # Let It Ride Bet 1 or 2 taken back (643a.11(b), (d))


@dataclass(frozen=True, slots=True)
class WagerResult:
    seat: int
    wager: str
    wager_cents: int
    outcome: Outcome
    net_cents: int
    paid_cents: int
    hand: Hand | None = None
    note: str = ""


@dataclass
class Settlement:
    results: list[WagerResult] = field(default_factory=list)
    progressive: list[ProgressivePayout | EnvyBonus] = field(default_factory=list)
    meter: LocalMeter | None = None

    def for_seat(self, seat: int) -> dict[str, WagerResult]:
        return {r.wager: r for r in self.results if r.seat == seat}


class SettlementRefused(ValueError):
    """A wager was handed to settlement that it cannot give a result: nothing is settled.

    Every wager placed gets exactly one result (won, lost, returned, withdrawn or forfeited)
    or the whole settlement is refused with this error, which names the seat, the wager and
    the rule; a wager never silently goes without a result.
    """


class MissingPaytable(SettlementRefused):
    """A wager was placed whose paytable the table does not have: the wager is not offered."""


def offered(table: T | None, seat: int, wager: str, rule: str, why: str = "") -> T:
    """The paytable (or letter) of a wager that was placed; refused when the table has none."""
    if table is None:
        raise MissingPaytable(
            f"seat {seat}: a {wager} wager was placed but no {wager} paytable is configured "
            f"({rule}), so the table does not offer it{why}"
        )
    return table


def operator_table(table: Paytable | None, seat: int, wager: str, rule: str) -> Paytable:
    """A paytable the regulations leave to the Rules Submission (paytables.operator_paytable)."""
    why = ": the regulations leave it to the Rules Submission, so it has no default"
    return offered(table, seat, wager, rule, why)


def progressive_results(
    wagers: Mapping[int, int],
    payouts: Sequence[ProgressivePayout | EnvyBonus],
    forfeited: frozenset[int],
    rule: str,
) -> dict[int, WagerResult]:
    """Each Progressive Payout Wager's result, from the payouts settle_progressive made.

    The wager was collected at "no more bets", so a hit's amount is all the player receives;
    a share of the meter is not paid from the table inventory (rule).
    """
    hits = {p.seat: p for p in payouts if isinstance(p, ProgressivePayout)}
    results = {}
    for seat, cents in wagers.items():
        hit = hits.get(seat)
        if hit is not None:
            note = f"paid from the meter, not the table inventory ({rule})" if hit.share else ""
            amount = hit.amount_cents
            results[seat] = WagerResult(
                seat, "progressive", cents, Outcome.WIN, amount - cents, amount, hit.hand, note
            )
        elif seat in forfeited:
            results[seat] = lose(seat, "progressive", cents, Outcome.FORFEIT)
        else:
            results[seat] = lose(seat, "progressive", cents)
    return results


def check_progressive_wagers(
    wagers: Mapping[int, int],
    meter: LocalMeter | None,
    envy_cents: Mapping[int, object],
    envy_rule: str,
    meter_rule: str,
) -> None:
    """A progressive wager needs the meter, and an amount the Envy Bonus table defines."""
    for seat, cents in wagers.items():
        if cents not in envy_cents:
            raise SettlementRefused(
                f"seat {seat}: a progressive wager of ${cents / 100:,.2f} has no Envy Bonus "
                f"table: the Progressive Payout Wager is $1 or $5 ({envy_rule})"
            )
        if meter is None:
            raise SettlementRefused(
                f"seat {seat}: a progressive wager was placed but no meter was given: it is "
                f"paid at the meter as it stands at the player's turn ({meter_rule})"
            )


def win(seat: int, wager: str, cents: int, pay: Pay, hand: Hand | None) -> WagerResult:
    """A paying hand: what the wager receives in all by its pay (Pay.paid_cents)."""
    total = pay.paid_cents(cents)
    outcome = Outcome.PUSH if pay.kind is PayKind.PUSH else Outcome.WIN
    return WagerResult(seat, wager, cents, outcome, total - cents, total, hand)


def lose(seat: int, wager: str, cents: int, outcome: Outcome = Outcome.LOSE) -> WagerResult:
    return WagerResult(seat, wager, cents, outcome, -cents, 0)


def push(seat: int, wager: str, cents: int, note: str = "") -> WagerResult:
    return WagerResult(seat, wager, cents, Outcome.PUSH, 0, cents, note=note)


def even(seat: int, wager: str, cents: int) -> WagerResult:
    return WagerResult(seat, wager, cents, Outcome.WIN, cents, 2 * cents)


def paytable_wager(
    seat: int, name: str, cents: int, table: Paytable, classes: list[Hand]
) -> WagerResult:
    won = table.pay_for(classes)
    if won is None:
        return lose(seat, name, cents)
    return win(seat, name, cents, won[1], won[0])


class _Seated(Protocol):
    @property
    def seat(self) -> int: ...


S = TypeVar("S", bound=_Seated)


def in_settlement_order(seats: int, players: Sequence[S]) -> list[S]:
    """649a.11(c), 653a.11(h), 643a.11(f): from the dealer's right, counter-clockwise.

    Every player is in it exactly once (check_seats says why not, first)."""
    by_seat = {p.seat: p for p in players}
    ordered = [by_seat[seat] for seat in settlement_order(seats) if seat in by_seat]
    if len(ordered) != len(players):
        raise SettlementRefused("a player's seat is not one of the table's: call check_seats")
    return ordered


def check_seats(seats: int, players: Sequence[_Seated], rule: str) -> None:
    """Each player at one of the table's betting positions (1..seats), each position once:
    the settlement goes around the table once (rule), so another seat's wagers, or the first
    of two entries for one seat, would get no result."""
    seen: set[int] = set()
    for p in players:
        seat = p.seat
        if isinstance(seat, bool) or not isinstance(seat, int) or not 1 <= seat <= seats:
            raise SettlementRefused(
                f"seat {seat!r}: the table has betting positions 1 to {seats} ({rule}), so "
                "its wagers would get no result"
            )
        if seat in seen:
            raise SettlementRefused(
                f"seat {seat} is given twice: each betting position is settled once, with all "
                f"its wagers ({rule}), so the first entry's wagers would get no result"
            )
        seen.add(seat)


def check_amounts(seat: int, amounts: Mapping[str, int], rule: str) -> None:
    """Each wager in integer cents: 0 for a wager not placed, never negative (rule: wagers
    are chips placed on the layout)."""
    for wager, cents in amounts.items():
        if isinstance(cents, bool) or not isinstance(cents, int):
            raise SettlementRefused(
                f"seat {seat}: the {wager} wager {cents!r} is not a whole number of cents"
            )
        if cents < 0:
            raise SettlementRefused(
                f"seat {seat}: a {wager} wager of {dollars(cents)}: a wager is chips placed on "
                f"the layout ({rule}), never a negative amount"
            )


def check_cards(groups: Sequence[Sequence[Card]], rule: str) -> None:
    seen: set[Card] = set()
    for cards in groups:
        if seen & set(cards) or len(set(cards)) != len(cards):
            raise SettlementRefused(f"the same card appears twice: one deck is in play ({rule})")
        seen |= set(cards)


# 653a.12(e), 643a.12(d): a payout limit is at least $50,000 ...
PAYOUT_LIMIT_FLOOR_CENTS = 5_000_000

# ... or the most one patron can win per round at the minimum wager: one hand of each
# five-card category (its pair a pair of aces, which Let It Ride pays) is every way to win.
BEST_OF_EACH_FIVE_CARD_CATEGORY = tuple(
    five_card_classes_of_value(category << CATEGORY_SHIFT | 14 << (CATEGORY_SHIFT - 4))
    for category in FiveCardCategory
)


def won_cents(table: Paytable, cents: int, classes: list[Hand]) -> int | None:
    """What a wager of `cents` wins net on this hand by this paytable; None: not listed."""
    won = table.pay_for(classes)
    return None if won is None else won[1].paid_cents(cents) - cents


def minimum_payout_limit_cents(most_won_cents: Callable[[int], int], minimum_wager: int) -> int:
    """The greater of $50,000 and the most won per round at the minimum wager (most_won_cents)."""
    if minimum_wager <= 0:
        raise ValueError("the minimum wager is a positive amount")
    return max(PAYOUT_LIMIT_FLOOR_CENTS, most_won_cents(minimum_wager))


def check_payout_limit(
    limit_cents: int | None,
    minimum_wager_cents: int | None,
    minimum_limit_cents: Callable[[int], int],
    rule: str,
    reading: str,
) -> None:
    """A payout limit below the regulatory minimum is an error, never silently applied."""
    if limit_cents is None:
        return
    if minimum_wager_cents is None:
        raise ValueError(
            f"payout_limit needs the table's minimum_wager: {rule} sets its minimum from the "
            "most one patron can win per round when betting the minimum wager"
        )
    least = minimum_limit_cents(minimum_wager_cents)
    if limit_cents < least:
        raise ValueError(
            f"payout_limit {dollars(limit_cents)} is below the {dollars(least)} "
            f"minimum of {rule}: at least {dollars(PAYOUT_LIMIT_FLOOR_CENTS)} or the most one "
            "patron can win per round when betting the minimum wager "
            f"({reading}), whichever is greater"
        )


def apply_limit(results: list[WagerResult], limited: set[str], limit: int | None) -> None:
    """653a.12(e), 643a.12(d): winnings of the game's own wagers on one hand are capped;
    progressive and bonus payouts are not. Later wagers of the hand give way first."""
    if limit is None:
        return
    allowance = limit
    for i, r in enumerate(results):
        if r.wager in limited and r.net_cents > 0:
            won = min(r.net_cents, allowance)
            allowance -= won
            if won != r.net_cents:
                results[i] = WagerResult(
                    r.seat,
                    r.wager,
                    r.wager_cents,
                    r.outcome,
                    won,
                    r.wager_cents + won,
                    r.hand,
                    note=f"payout limited to ${limit // 100:,}",
                )
