"""Three Card Poker settlement (649a.11, 649a.12, 2012 text). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tablectl.rules.cards import Card
from tablectl.rules.hands import six_card_bonus_classes, three_card_classes
from tablectl.rules.meters import LocalMeter
from tablectl.rules.paytables import PAYTABLES, TCP, TCP_ENVY_CENTS
from tablectl.rules.poker import DEALER_QUALIFIES_TCP, three_card_value
from tablectl.rules.progressive import settle_tcp_progressive
from tablectl.rules.settlement.common import (
    Outcome,
    Settlement,
    SettlementRefused,
    WagerResult,
    check_amounts,
    check_cards,
    check_progressive_wagers,
    check_seats,
    even,
    in_settlement_order,
    lose,
    offered,
    paytable_wager,
    progressive_results,
    push,
    win,
)

MAX_SEATS = 7  # 649a.2(a)
SEAT_RULE = "649a.2(a), 649a.11(c)"  # the betting positions, each settled in turn


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

    def __post_init__(self) -> None:
        if not 1 <= self.seats <= MAX_SEATS:
            raise ValueError(
                f"seats {self.seats}: a Three Card Poker table has betting positions for no "
                f"more than {MAX_SEATS} players (649a.2(a))"
            )


def check_tcp_wagers(rules: TcpRules, player: TcpSeat) -> None:
    """649a.7: each wager placed as the text allows, before the one it requires.

    Amounts are never negative (649a.7(a)); the Play Wager follows an Ante (649a.7(d)(1));
    the Progressive Payout and Six Card Bonus Wagers follow an Ante or a Pair Plus Wager
    ((d)(4), (d)(5)); a player with no wager is dealt no cards (649a.8(d), 649a.10(b)); and
    649a.7(e): the Ante that a Pair Plus Wager requires in the version the table offers.
    """
    ante, pp, seat = player.ante, player.pair_plus, player.seat
    amounts = {
        "ante": ante,
        "pair-plus": pp,
        "progressive": player.progressive,
        "six-card-bonus": player.six_card_bonus,
    }
    check_amounts(seat, amounts, "649a.7(a)")
    if player.play and not ante:
        raise SettlementRefused(
            f"seat {seat}: a Play Wager without an Ante Wager: a player places an Ante Wager "
            "then a Play Wager equal to it (649a.7(d)(1))"
        )
    if not ante and not pp:
        for wager, rule in (("progressive", "649a.7(d)(4)"), ("six-card-bonus", "649a.7(d)(5)")):
            if amounts[wager]:
                raise SettlementRefused(
                    f"seat {seat}: a {wager} wager without an Ante or Pair Plus Wager: it is "
                    f"made after placing an Ante Wager or a Pair Plus Wager, or both ({rule})"
                )
        raise SettlementRefused(
            f"seat {seat}: no wager placed, so no cards are dealt to it (649a.8(d), 649a.10(b))"
        )
    if rules.variant_649a7e == 1 and pp and ante < pp:
        raise SettlementRefused(
            f"seat {seat}: the Ante must be at least the Pair Plus (649a.7(e)(1))"
        )
    if rules.variant_649a7e == 2 and pp and 2 * ante < pp:
        raise SettlementRefused(
            f"seat {seat}: the Ante must be at least half the Pair Plus (649a.7(e)(2))"
        )
    if rules.variant_649a7e == 3 and (not ante or not pp or max(ante, pp) > 5 * min(ante, pp)):
        raise SettlementRefused(
            f"seat {seat}: Ante and Pair Plus are both required, neither more than five times "
            "the other (649a.7(e)(3))"
        )


def settle_three_card_poker(
    rules: TcpRules,
    players: Sequence[TcpSeat],
    dealer: tuple[Card, ...],
    meter: LocalMeter | None = None,
) -> Settlement:
    """Every wager placed gets one result, seat by seat from the dealer's right, in 649a.11(c)'s
    order: Ante, Play (and the Ante Bonus), Pair Plus, Progressive Payout, Six Card Bonus."""
    check_seats(rules.seats, players, SEAT_RULE)
    if len(dealer) != 3 or any(len(p.cards) != 3 for p in players):
        raise SettlementRefused(
            "Three Card Poker: three cards to each player and to the dealer (649a.8(d))"
        )
    check_cards([dealer, *(p.cards for p in players)], "649a.3(a)")
    for player in players:
        check_tcp_wagers(rules, player)
        if player.six_card_bonus:
            offered(rules.six_card_bonus, player.seat, "six-card-bonus", "649a.12(f)")
        if player.progressive:
            offered(rules.progressive, player.seat, "progressive", "649a.12(e)")
    wagers = {p.seat: p.progressive for p in players if p.progressive}
    check_progressive_wagers(wagers, meter, TCP_ENVY_CENTS, "649a.12(e)(5)", "649a.12(e)(4)")
    dealer_value = three_card_value(dealer)
    qualifies = dealer_value >= DEALER_QUALIFIES_TCP
    bonus_name = "ante-bonus" if rules.variant_649a7e is None else "ante-bonus-649a7e"
    ante_bonus = PAYTABLES[TCP, bonus_name, rules.ante_bonus]
    pair_plus = PAYTABLES[TCP, "pair-plus", rules.pair_plus]
    out = Settlement(meter=meter)
    progressive: dict[int, WagerResult] = {}
    if wagers and rules.progressive and meter is not None:  # 649a.11(c)(5)
        # 649a.11(b)(2): a fold forfeits the Progressive Payout Wager, not Envy Bonuses.
        folded = frozenset(p.seat for p in players if p.ante and not p.play)
        out.meter, out.progressive = settle_tcp_progressive(
            paytable=rules.progressive,
            seats=rules.seats,
            reset_cents=rules.reset_cents,
            meter=meter,
            wagers=wagers,
            hands={p.seat: p.cards for p in players},
            folded=folded,
        )
        progressive = progressive_results(wagers, out.progressive, folded, "649a.11(c)(5)(iv)")
    for p in in_settlement_order(rules.seats, players):
        seat = p.seat
        classes = three_card_classes(p.cards)
        folded_here = p.ante > 0 and not p.play
        if folded_here:
            # 649a.11(b)(1)-(3): the Ante and the Pair Plus are forfeited; not the Six Card Bonus.
            out.results.append(lose(seat, "ante", p.ante, Outcome.FORFEIT))
            if p.pair_plus:
                out.results.append(lose(seat, "pair-plus", p.pair_plus, Outcome.FORFEIT))
        elif p.ante:
            value = three_card_value(p.cards)
            if not qualifies:  # 649a.11(c)(3)(i)
                out.results.append(even(seat, "ante", p.ante))
                out.results.append(push(seat, "play", p.ante, "dealer below queen high"))
            elif value > dealer_value:  # (ii)(B)
                out.results += [even(seat, "ante", p.ante), even(seat, "play", p.ante)]
            elif value < dealer_value:  # (ii)(A)
                out.results += [lose(seat, "ante", p.ante), lose(seat, "play", p.ante)]
            else:  # (ii)(C)
                out.results += [push(seat, "ante", p.ante), push(seat, "play", p.ante)]
            # 649a.12(b): the Ante Bonus is paid whether or not the hand beats the dealer's.
            won = ante_bonus.pay_for(classes)
            if won is not None:
                out.results.append(win(seat, "ante-bonus", p.ante, won[1], won[0]))
        if p.pair_plus and not folded_here:  # 649a.11(c)(4)
            out.results.append(paytable_wager(seat, "pair-plus", p.pair_plus, pair_plus, classes))
        if p.progressive:  # 649a.11(c)(5)
            out.results.append(progressive[seat])
        if p.six_card_bonus and rules.six_card_bonus:  # 649a.11(c)(6)
            table = PAYTABLES[TCP, "six-card-bonus", rules.six_card_bonus]
            six = six_card_bonus_classes([*p.cards, *dealer])
            out.results.append(paytable_wager(seat, "six-card-bonus", p.six_card_bonus, table, six))
    return out
