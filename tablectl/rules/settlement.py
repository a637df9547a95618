"""Settlement of a round for each game, in the regulations' order. Pure.

Seats are settled counter-clockwise from the dealer's right (seat N down to 1: 649a.11(c),
653a.11(h), 643a.11(f)); within a seat, wagers in the order the section lists them. Each
result carries `net_cents` (what the player gains or loses on that wager) and `paid_cents`
(what the dealer hands over, the returned wager included). Fractions of a cent from odds
such as 3 to 2 are not paid (rounded down).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from tablectl.core.meters import LocalMeter
from tablectl.rules.cards import Card
from tablectl.rules.hands import (
    five_card_classes,
    five_card_classes_of_value,
    six_card_bonus_classes,
    three_card_classes,
)
from tablectl.rules.paytables import (
    LIR,
    PAYTABLES,
    TCP,
    UTH,
    UTH_ENVY_CENTS,
    Hand,
    Pay,
    PayKind,
    Paytable,
)
from tablectl.rules.poker import (
    CATEGORY_SHIFT,
    DEALER_QUALIFIES_TCP,
    DEALER_QUALIFIES_UTH,
    FiveCardCategory,
    five_card_value,
    three_card_value,
)
from tablectl.rules.progressive import (
    EnvyBonus,
    ProgressivePayout,
    settle_progressive,
    settle_tcp_progressive,
    settlement_order,
)


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


def _win(seat: int, wager: str, cents: int, pay: Pay, hand: Hand | None) -> WagerResult:
    if pay.kind is PayKind.PUSH:
        return WagerResult(seat, wager, cents, Outcome.PUSH, 0, cents, hand)
    if pay.kind is PayKind.TO:
        won = cents * pay.odds.numerator // pay.odds.denominator
        return WagerResult(seat, wager, cents, Outcome.WIN, won, cents + won, hand)
    if pay.kind is PayKind.FOR:
        total = cents * pay.odds.numerator // pay.odds.denominator
        return WagerResult(seat, wager, cents, Outcome.WIN, total - cents, total, hand)
    if pay.kind is PayKind.AMOUNT:
        # Fixed amounts are for a $1 wager; a larger wager is paid in proportion.
        won = pay.cents * cents // 100
        return WagerResult(seat, wager, cents, Outcome.WIN, won, cents + won, hand)
    raise ValueError(f"{pay} is settled by the progressive meter")


def _lose(seat: int, wager: str, cents: int, outcome: Outcome = Outcome.LOSE) -> WagerResult:
    return WagerResult(seat, wager, cents, outcome, -cents, 0)


def _push(seat: int, wager: str, cents: int, note: str = "") -> WagerResult:
    return WagerResult(seat, wager, cents, Outcome.PUSH, 0, cents, note=note)


def _even(seat: int, wager: str, cents: int) -> WagerResult:
    return WagerResult(seat, wager, cents, Outcome.WIN, cents, 2 * cents)


def _paytable_wager(
    seat: int, name: str, cents: int, table: Paytable, classes: list[Hand]
) -> WagerResult:
    won = table.pay_for(classes)
    if won is None:
        return _lose(seat, name, cents)
    return _win(seat, name, cents, won[1], won[0])


class _Seated(Protocol):
    @property
    def seat(self) -> int: ...


S = TypeVar("S", bound=_Seated)


def _in_settlement_order(seats: int, players: Sequence[S]) -> list[S]:
    """649a.11(c), 653a.11(h), 643a.11(f): from the dealer's right, counter-clockwise."""
    by_seat = {p.seat: p for p in players}
    return [by_seat[seat] for seat in settlement_order(seats) if seat in by_seat]


def _check_cards(groups: Sequence[Sequence[Card]]) -> None:
    seen: set[Card] = set()
    for cards in groups:
        if seen & set(cards) or len(set(cards)) != len(cards):
            raise ValueError("the same card appears twice: one deck is in play")
        seen |= set(cards)


def _apply_limit(results: list[WagerResult], limited: set[str], limit: int | None) -> None:
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


# --- Three Card Poker ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TcpSeat:
    seat: int
    cards: tuple[Card, ...]
    ante: int = 0
    play: bool = (
        False  # the Play Wager, equal to the Ante (649a.7(d)(1)); False with an Ante = fold
    )
    pair_plus: int = 0
    progressive: int = 0
    six_card_bonus: int = 0


@dataclass(frozen=True, slots=True)
class TcpRules:
    seats: int
    ante_bonus: str = "A"  # 649a.12(b), or of 649a.12(c) with a 649a.7(e) version
    variant_649a7e: int | None = None  # 1, 2 or 3: which 649a.7(e) paragraph applies
    pair_plus: str = "A"
    progressive: str | None = None
    six_card_bonus: str | None = None
    reset_cents: int = 100_000


def check_tcp_wagers(rules: TcpRules, player: TcpSeat) -> None:
    """649a.7(e): the Ante that a Pair Plus Wager requires in the version the table offers."""
    ante, pp, seat = player.ante, player.pair_plus, player.seat
    if rules.variant_649a7e == 1 and pp and ante < pp:
        raise ValueError(f"seat {seat}: the Ante must be at least the Pair Plus (649a.7(e)(1))")
    if rules.variant_649a7e == 2 and pp and 2 * ante < pp:
        raise ValueError(
            f"seat {seat}: the Ante must be at least half the Pair Plus (649a.7(e)(2))"
        )
    if rules.variant_649a7e == 3 and (not ante or not pp or max(ante, pp) > 5 * min(ante, pp)):
        raise ValueError(
            f"seat {seat}: Ante and Pair Plus are both required, neither more than five times "
            "the other (649a.7(e)(3))"
        )


def settle_three_card_poker(
    rules: TcpRules,
    players: Sequence[TcpSeat],
    dealer: tuple[Card, ...],
    meter: LocalMeter | None = None,
) -> Settlement:
    _check_cards([dealer, *(p.cards for p in players)])
    for player in players:
        check_tcp_wagers(rules, player)
    dealer_value = three_card_value(dealer)
    qualifies = dealer_value >= DEALER_QUALIFIES_TCP
    bonus_name = "ante-bonus" if rules.variant_649a7e is None else "ante-bonus-649a7e"
    ante_bonus = PAYTABLES[TCP, bonus_name, rules.ante_bonus]
    pair_plus = PAYTABLES[TCP, "pair-plus", rules.pair_plus]
    out = Settlement(meter=meter)
    for p in _in_settlement_order(rules.seats, players):
        seat = p.seat
        classes = three_card_classes(p.cards)
        folded = p.ante > 0 and not p.play
        if p.ante and folded:
            # 649a.11(b)(1)-(3): the Ante and the Pair Plus are forfeited; not the Six Card Bonus.
            out.results.append(_lose(seat, "ante", p.ante, Outcome.FORFEIT))
            if p.pair_plus:
                out.results.append(_lose(seat, "pair-plus", p.pair_plus, Outcome.FORFEIT))
        elif p.ante:
            value = three_card_value(p.cards)
            if not qualifies:  # 649a.11(c)(3)(i)
                out.results.append(_even(seat, "ante", p.ante))
                out.results.append(_push(seat, "play", p.ante, "dealer below queen high"))
            elif value > dealer_value:  # (ii)(B)
                out.results += [_even(seat, "ante", p.ante), _even(seat, "play", p.ante)]
            elif value < dealer_value:  # (ii)(A)
                out.results += [_lose(seat, "ante", p.ante), _lose(seat, "play", p.ante)]
            else:  # (ii)(C)
                out.results += [_push(seat, "ante", p.ante), _push(seat, "play", p.ante)]
            # 649a.12(b): the Ante Bonus is paid whether or not the hand beats the dealer's.
            won = ante_bonus.pay_for(classes)
            if won is not None:
                out.results.append(_win(seat, "ante-bonus", p.ante, won[1], won[0]))
        if p.pair_plus and not folded:  # 649a.11(c)(4)
            out.results.append(_paytable_wager(seat, "pair-plus", p.pair_plus, pair_plus, classes))
        if p.six_card_bonus and rules.six_card_bonus:  # 649a.11(c)(6)
            table = PAYTABLES[TCP, "six-card-bonus", rules.six_card_bonus]
            six = six_card_bonus_classes([*p.cards, *dealer])
            out.results.append(
                _paytable_wager(seat, "six-card-bonus", p.six_card_bonus, table, six)
            )
    if rules.progressive and meter is not None:  # 649a.11(c)(5)
        wagers = {p.seat: p.progressive for p in players if p.progressive}
        folded_seats = frozenset(p.seat for p in players if p.ante and not p.play)
        out.meter, out.progressive = settle_tcp_progressive(
            paytable=rules.progressive,
            seats=rules.seats,
            reset_cents=rules.reset_cents,
            meter=meter,
            wagers=wagers,
            hands={p.seat: p.cards for p in players},
            folded=folded_seats,
        )
    return out


# --- Ultimate Texas Hold 'Em ---------------------------------------------------------------


class ProgressiveBasis(StrEnum):
    BEST_FIVE_OF_SEVEN = "five-card-2012"  # 653a.11(j), 2012 text
    TWO_CARDS_AND_FLOP = "two-cards-and-flop-2019"  # 653a.11(k), as amended 2019


@dataclass(frozen=True, slots=True)
class UthSeat:
    seat: int
    hole: tuple[Card, ...]
    ante: int
    play_multiple: int = 0  # 4 or 3 before the flop, 2 after it, 1 at the river, 0 folded
    trips: int = 0
    progressive: int = 0
    bad_beat: int = 0  # 2019 text, 653a.11(j)
    six_card_bonus: int = 0  # 2019 text, 653a.11(m), on six_card_cards
    six_card_cards: tuple[Card, ...] = ()  # the four additional Six Card Bonus cards

    @property
    def blind(self) -> int:
        return self.ante  # 653a.7(d)(1): Ante and Blind in equal amounts


@dataclass(frozen=True, slots=True)
class UthRules:
    seats: int
    blind: str = "A"
    trips: str = "A"
    progressive_basis: ProgressiveBasis | None = None
    reset_cents: int = 1_000_000
    payout_limit_cents: int | None = None  # 653a.12(e): at least $50,000 where set
    # Operator-supplied (paytables.operator_paytable): no default exists in the regulations.
    bad_beat: Paytable | None = None
    six_card_bonus: Paytable | None = None


class MissingPaytable(ValueError):
    """A wager was placed whose paytable the operator has not supplied."""


def _operator_table(table: Paytable | None, wager: str) -> Paytable:
    if table is None:
        raise MissingPaytable(
            f"a {wager} wager was placed but no {wager} paytable is configured: the "
            "regulations leave it to the Rules Submission, so it has no default"
        )
    return table


def _bad_beat(seat: int, cents: int, table: Paytable, player: int, dealer: int) -> WagerResult:
    """653a.11(j) (2019): a three-of-a-kind or better that loses, on either side."""
    trips = FiveCardCategory.THREE_OF_A_KIND << CATEGORY_SHIFT
    if player >= trips and dealer > player:
        return _paytable_wager(seat, "bad-beat", cents, table, five_card_classes_of_value(player))
    if dealer >= trips and player > dealer:
        return _paytable_wager(seat, "bad-beat", cents, table, five_card_classes_of_value(dealer))
    return _lose(seat, "bad-beat", cents)


UTH_LIMITED_WAGERS = {"ante", "blind", "play", "trips"}


def settle_ultimate_texas_holdem(
    rules: UthRules,
    players: Sequence[UthSeat],
    board: tuple[Card, ...],
    dealer: tuple[Card, ...],
    meter: LocalMeter | None = None,
) -> Settlement:
    if len(board) != 5 or len(dealer) != 2 or any(len(p.hole) != 2 for p in players):
        raise ValueError("Ultimate Texas Hold 'Em: two cards each and five on the board")
    if any(p.play_multiple not in (0, 1, 2, 3, 4) for p in players):
        raise ValueError("a Play Wager is 4x or 3x, 2x, or 1x the Ante (653a.11(b), (d), (f))")
    _check_cards([board, dealer, *(p.hole for p in players)])
    for extra in players:
        _check_cards([board, dealer, extra.hole, extra.six_card_cards])
    dealer_value = five_card_value([*dealer, *board])
    qualifies = dealer_value >= DEALER_QUALIFIES_UTH
    blind_table = PAYTABLES[UTH, "blind", rules.blind]
    trips_table = PAYTABLES[UTH, "trips", rules.trips]
    out = Settlement(meter=meter)
    for p in _in_settlement_order(rules.seats, players):
        seat = p.seat
        value = five_card_value([*p.hole, *board])
        classes = five_card_classes([*p.hole, *board])
        seat_results: list[WagerResult] = []
        if p.play_multiple == 0:  # 653a.11(f)(2): a fold forfeits the Ante and Blind
            seat_results += [
                _lose(seat, "ante", p.ante, Outcome.FORFEIT),
                _lose(seat, "blind", p.blind, Outcome.FORFEIT),
            ]
        else:
            play = p.ante * p.play_multiple
            if value > dealer_value:  # 653a.11(h)(2)(ii)
                ante = (
                    _even(seat, "ante", p.ante)
                    if qualifies
                    else _push(seat, "ante", p.ante, "dealer below a pair")
                )
                won = blind_table.pay_for(classes)
                blind = (
                    _win(seat, "blind", p.blind, won[1], won[0])
                    if won
                    else _push(seat, "blind", p.blind, "winning hand below the Blind table")
                )
                seat_results += [ante, blind, _even(seat, "play", play)]
            elif value < dealer_value:  # (h)(2)(i); the Ante returned when (h)(1) applies
                ante = (
                    _lose(seat, "ante", p.ante)
                    if qualifies
                    else _push(seat, "ante", p.ante, "dealer below a pair")
                )
                seat_results += [ante, _lose(seat, "blind", p.blind), _lose(seat, "play", play)]
            else:  # (h)(2)(iii)
                seat_results += [
                    _push(seat, "ante", p.ante),
                    _push(seat, "blind", p.blind),
                    _push(seat, "play", play),
                ]
        if p.trips:  # 653a.11(i): paid whatever the hand against the dealer's
            seat_results.append(_paytable_wager(seat, "trips", p.trips, trips_table, classes))
        if p.bad_beat and p.play_multiple:
            table = _operator_table(rules.bad_beat, "bad-beat")
            seat_results.append(_bad_beat(seat, p.bad_beat, table, value, dealer_value))
        if p.six_card_bonus:  # 653a.11(m): the player's two cards and four more
            table = _operator_table(rules.six_card_bonus, "six-card-bonus")
            if len(p.six_card_cards) != 4:
                raise ValueError("the Six Card Bonus needs the four additional cards")
            six = five_card_classes([*p.hole, *p.six_card_cards])
            seat_results.append(
                _paytable_wager(seat, "six-card-bonus", p.six_card_bonus, table, six)
            )
        _apply_limit(seat_results, UTH_LIMITED_WAGERS, rules.payout_limit_cents)
        out.results += seat_results
    if rules.progressive_basis and meter is not None:
        hands = {}
        for p in players:
            if rules.progressive_basis is ProgressiveBasis.BEST_FIVE_OF_SEVEN:
                hands[p.seat] = five_card_classes([*p.hole, *board])
            else:  # the 2019 text: the player's two cards and the three-card Flop
                hands[p.seat] = five_card_classes([*p.hole, *board[:3]])
        out.meter, out.progressive = settle_progressive(
            paytable=PAYTABLES[UTH, "progressive", "A"],
            envy_cents=UTH_ENVY_CENTS,
            seats=rules.seats,
            reset_cents=rules.reset_cents,
            meter=meter,
            wagers={p.seat: p.progressive for p in players if p.progressive},
            hands=hands,
        )
    return out


# --- Let It Ride ---------------------------------------------------------------------------


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
    payout_limit_cents: int | None = None  # 643a.12(d)


def settle_let_it_ride(
    rules: LirRules, players: Sequence[LirSeat], community: tuple[Card, ...]
) -> Settlement:
    if len(community) != 2 or any(len(p.cards) != 3 for p in players):
        raise ValueError("Let It Ride: three cards each and two community cards")
    _check_cards([community, *(p.cards for p in players)])
    base = PAYTABLES[LIR, "base", rules.base]
    out = Settlement()
    for p in _in_settlement_order(rules.seats, players):
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
                seat_results.append(_paytable_wager(seat, name, p.bet, base, classes))
        _apply_limit(seat_results, {"bet-1", "bet-2", "bet-3"}, rules.payout_limit_cents)
        if p.bonus and rules.bonus:
            table = PAYTABLES[LIR, "bonus", rules.bonus]
            seat_results.append(_paytable_wager(seat, "bonus", p.bonus, table, classes))
        if p.three_card_bonus and rules.three_card_bonus:  # on the player's three cards
            table = PAYTABLES[LIR, "three-card-bonus", rules.three_card_bonus]
            seat_results.append(
                _paytable_wager(
                    seat, "three-card-bonus", p.three_card_bonus, table, three_card_classes(p.cards)
                )
            )
        out.results += seat_results
    return out
