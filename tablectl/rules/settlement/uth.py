"""Ultimate Texas Hold 'Em settlement (653a.11 as amended 2019, 653a.12). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from tablectl.rules.cards import Card
from tablectl.rules.hands import five_card_classes, five_card_classes_of_value
from tablectl.rules.meters import LocalMeter
from tablectl.rules.paytables import (
    PAYTABLES,
    UTH,
    UTH_ENVY_CENTS,
    UTH_MIN_RESET_CENTS,
    Paytable,
)
from tablectl.rules.poker import (
    CATEGORY_SHIFT,
    DEALER_QUALIFIES_UTH,
    FiveCardCategory,
    five_card_value,
)
from tablectl.rules.progressive import settle_progressive
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
    check_progressive_wagers,
    check_seats,
    even,
    in_settlement_order,
    lose,
    minimum_payout_limit_cents,
    offered,
    operator_table,
    paytable_wager,
    progressive_results,
    push,
    win,
    won_cents,
)

MAX_SEATS = 6  # 653a.2(a)
SEAT_RULE = "653a.2(a), 653a.11(h)"  # the betting positions, each settled in turn


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
    trips: str | None = "A"  # None: the table does not offer the Trips Wager
    # 653a.7(d)(3): the Progressive Payout Wager, decided on the player's two cards and the
    # three-card Flop (653a.11(k), 2019 text).
    progressive: bool = False
    reset_cents: int = UTH_MIN_RESET_CENTS
    # 653a.12(e): at least uth_minimum_payout_limit_cents, checked here; needs the minimum.
    payout_limit_cents: int | None = None
    minimum_wager_cents: int | None = None  # the table minimum of each limited wager
    # Operator-supplied (paytables.operator_paytable): no default exists in the regulations.
    bad_beat: Paytable | None = None
    six_card_bonus: Paytable | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.seats <= MAX_SEATS:
            raise ValueError(
                f"seats {self.seats}: an Ultimate Texas Hold 'Em table has betting positions "
                f"for no more than {MAX_SEATS} players (653a.2(a))"
            )
        check_payout_limit(
            self.payout_limit_cents,
            self.minimum_wager_cents,
            partial(uth_minimum_payout_limit_cents, self.blind, self.trips),
            "653a.12(e)",
            "Ante, Blind and Trips at the minimum, the Play at 4x the Ante",
        )


def uth_minimum_payout_limit_cents(blind: str, trips: str | None, minimum_wager_cents: int) -> int:
    """653a.12(e): the least payout limit a table may set, in cents.

    The greater of $50,000 and the most one patron can win per round betting the minimum: the
    Ante and Blind at the minimum (653a.7(d)(1)), the Play at its largest, 4x the Ante
    (653a.11(b)), and the Trips at the minimum when the table offers it (653a.7(d)(2)); the
    progressive and the 2019 bonus wagers are not limited, so they do not count.
    """
    blind_table = PAYTABLES[UTH, "blind", blind]
    trips_table = None if trips is None else PAYTABLES[UTH, "trips", trips]

    def most_won(m: int) -> int:
        most = 0
        for classes in BEST_OF_EACH_FIVE_CARD_CATEGORY:
            won = m + 4 * m  # 653a.12(a): Ante and Play 1 to 1 against a qualifying dealer
            won += won_cents(blind_table, m, classes) or 0  # below the table: returned
            if trips_table is not None:
                trips_won = won_cents(trips_table, m, classes)
                won += -m if trips_won is None else trips_won
            most = max(most, won)
        return most

    return minimum_payout_limit_cents(most_won, minimum_wager_cents)


def _bad_beat(seat: int, cents: int, table: Paytable, player: int, dealer: int) -> WagerResult:
    """653a.11(j) (2019): a three-of-a-kind or better that loses, on either side."""
    trips = FiveCardCategory.THREE_OF_A_KIND << CATEGORY_SHIFT
    if player >= trips and dealer > player:
        return paytable_wager(seat, "bad-beat", cents, table, five_card_classes_of_value(player))
    if dealer >= trips and player > dealer:
        return paytable_wager(seat, "bad-beat", cents, table, five_card_classes_of_value(dealer))
    return lose(seat, "bad-beat", cents)


UTH_LIMITED_WAGERS = {"ante", "blind", "play", "trips"}


def _check_placed(player: UthSeat) -> None:
    """653a.7: each wager placed as the text allows, after the ones it requires.

    Amounts are never negative (653a.7(a)); a player competes by placing an Ante and an equal
    Blind (653a.7(d)(1)), and only such a player is dealt cards (653a.8(d), 653a.10(b)), on
    which every other wager is settled: the Trips is made in addition to them ((d)(2)), the
    Progressive Payout Wager after them ((d)(3)), and the 2019 Bad Beat and Six Card Bonus
    are settled on that player's hand (653a.11(j), (m))."""
    seat = player.seat
    amounts = {
        "ante": player.ante,
        "trips": player.trips,
        "progressive": player.progressive,
        "bad-beat": player.bad_beat,
        "six-card-bonus": player.six_card_bonus,
    }
    check_amounts(seat, amounts, "653a.7(a)")
    if player.play_multiple not in (0, 1, 2, 3, 4):
        raise SettlementRefused(
            f"seat {seat}: a Play Wager is 4x or 3x, 2x, or 1x the Ante (653a.11(b), (d), (f))"
        )
    if player.ante:
        return
    requires = {
        "trips": "it is made in addition to the Ante and Blind Wagers (653a.7(d)(2))",
        "progressive": "it is made after placing the Ante and Blind Wagers (653a.7(d)(3))",
        "bad-beat": "it is settled on the player's hand (653a.11(j)), and cards go only to "
        "players who placed the Ante and Blind (653a.7(d)(1), 653a.10(b))",
        "six-card-bonus": "it is settled with the player's two cards (653a.11(m)), and cards "
        "go only to players who placed the Ante and Blind (653a.7(d)(1), 653a.10(b))",
    }
    for wager, why in requires.items():
        if amounts[wager]:
            raise SettlementRefused(f"seat {seat}: a {wager} wager without an Ante: {why}")
    raise SettlementRefused(
        f"seat {seat}: no Ante and Blind Wagers: a player competes by placing both "
        "(653a.7(d)(1)), and cards go only to players who did (653a.8(d), 653a.10(b))"
    )


def _check_offered(rules: UthRules, player: UthSeat) -> None:
    """Every optional wager placed must be one the table offers."""
    seat = player.seat
    if player.bad_beat:
        operator_table(rules.bad_beat, seat, "bad-beat", "653a.12(g)")
    if player.six_card_bonus:
        operator_table(rules.six_card_bonus, seat, "six-card-bonus", "653a.12(f)")
        if len(player.six_card_cards) != 4:
            raise SettlementRefused(
                f"seat {seat}: the Six Card Bonus needs the four additional cards (653a.11(m))"
            )
    if player.trips:
        offered(rules.trips, seat, "trips", "653a.12(c)")
    if player.progressive:
        # A table that does not offer the progressive has no 653a.12(d) paytable in use.
        offered(rules.progressive or None, seat, "progressive", "653a.7(d)(3), 653a.12(d)")


def settle_ultimate_texas_holdem(
    rules: UthRules,
    players: Sequence[UthSeat],
    board: tuple[Card, ...],
    dealer: tuple[Card, ...],
    meter: LocalMeter | None = None,
) -> Settlement:
    """Every wager placed gets one result, seat by seat from the dealer's right, in 653a.11's
    order (2019): Ante, Blind, Play, Trips, Bad Beat Bonus, Progressive Payout, Six Card Bonus."""
    check_seats(rules.seats, players, SEAT_RULE)
    if len(board) != 5 or len(dealer) != 2 or any(len(p.hole) != 2 for p in players):
        raise SettlementRefused(
            "Ultimate Texas Hold 'Em: two cards each and five on the board (653a.8(d)-(e))"
        )
    check_cards([board, dealer, *(p.hole for p in players)], "653a.3(a)")
    for player in players:
        _check_placed(player)
        check_cards([board, dealer, player.hole, player.six_card_cards], "653a.3(a)")
        _check_offered(rules, player)
    wagers = {p.seat: p.progressive for p in players if p.progressive}
    check_progressive_wagers(wagers, meter, UTH_ENVY_CENTS, "653a.12(d)(5)", "653a.12(d)(4)")
    dealer_value = five_card_value([*dealer, *board])
    qualifies = dealer_value >= DEALER_QUALIFIES_UTH
    blind_table = PAYTABLES[UTH, "blind", rules.blind]
    out = Settlement(meter=meter)
    progressive: dict[int, WagerResult] = {}
    if wagers and meter is not None:
        # 653a.11(k) (2019): "the rank of the player's two cards and the three-card Flop",
        # paid "irrespective of whether the player's hand outranks the dealer's", so a fold
        # does not forfeit it; but a folded hand is never shown and earns no one an Envy Bonus
        # (as 649a.11(c) has it for Three Card Poker).
        folded = frozenset(p.seat for p in players if p.play_multiple == 0)
        out.meter, out.progressive = settle_progressive(
            paytable=PAYTABLES[UTH, "progressive", "A"],
            envy_cents=UTH_ENVY_CENTS,
            seats=rules.seats,
            reset_cents=rules.reset_cents,
            meter=meter,
            wagers=wagers,
            hands={p.seat: five_card_classes([*p.hole, *board[:3]]) for p in players},
            folded=folded,
            fold_forfeits=False,
        )
        progressive = progressive_results(wagers, out.progressive, frozenset(), "653a.11(k)(4)")
    for p in in_settlement_order(rules.seats, players):
        seat = p.seat
        value = five_card_value([*p.hole, *board])
        classes = five_card_classes([*p.hole, *board])
        seat_results: list[WagerResult] = []
        if p.play_multiple == 0:
            # 653a.11(f)(2) (2019): a fold collects the Ante, Blind and Bad Beat Bonus Wagers.
            seat_results += [
                lose(seat, "ante", p.ante, Outcome.FORFEIT),
                lose(seat, "blind", p.blind, Outcome.FORFEIT),
            ]
            if p.bad_beat:
                seat_results.append(lose(seat, "bad-beat", p.bad_beat, Outcome.FORFEIT))
        else:
            play = p.ante * p.play_multiple
            if value > dealer_value:  # 653a.11(h)(2)(ii)
                ante = (
                    even(seat, "ante", p.ante)
                    if qualifies
                    else push(seat, "ante", p.ante, "dealer below a pair")
                )
                won = blind_table.pay_for(classes)
                blind = (
                    win(seat, "blind", p.blind, won[1], won[0])
                    if won
                    else push(seat, "blind", p.blind, "winning hand below the Blind table")
                )
                seat_results += [ante, blind, even(seat, "play", play)]
            elif value < dealer_value:  # (h)(2)(i); the Ante returned when (h)(1) applies
                ante = (
                    lose(seat, "ante", p.ante)
                    if qualifies
                    else push(seat, "ante", p.ante, "dealer below a pair")
                )
                seat_results += [ante, lose(seat, "blind", p.blind), lose(seat, "play", play)]
            else:  # (h)(2)(iii)
                seat_results += [
                    push(seat, "ante", p.ante),
                    push(seat, "blind", p.blind),
                    push(seat, "play", play),
                ]
        if p.trips and rules.trips:  # 653a.11(i): paid whatever the hand against the dealer's
            trips_table = PAYTABLES[UTH, "trips", rules.trips]
            seat_results.append(paytable_wager(seat, "trips", p.trips, trips_table, classes))
        if p.bad_beat and rules.bad_beat and p.play_multiple:  # 653a.11(j) (2019)
            seat_results.append(_bad_beat(seat, p.bad_beat, rules.bad_beat, value, dealer_value))
        if p.progressive:  # 653a.11(k) (2019)
            seat_results.append(progressive[seat])
        if p.six_card_bonus and rules.six_card_bonus:  # 653a.11(m): two cards and four more
            six = five_card_classes([*p.hole, *p.six_card_cards])
            seat_results.append(
                paytable_wager(seat, "six-card-bonus", p.six_card_bonus, rules.six_card_bonus, six)
            )
        apply_limit(seat_results, UTH_LIMITED_WAGERS, rules.payout_limit_cents)
        out.results += seat_results
    return out
