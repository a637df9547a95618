"""Every wager handed to settlement gets exactly one result, in the section's order, or
settlement refuses with an error naming the seat, the wager and the rule."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tablectl.rules.cards import parse_cards
from tablectl.rules.meters import LocalMeter
from tablectl.rules.paytables import Hand, operator_paytable
from tablectl.rules.settlement import (
    LirRules,
    LirSeat,
    MissingPaytable,
    Outcome,
    Settlement,
    SettlementRefused,
    TcpRules,
    TcpSeat,
    UthRules,
    UthSeat,
    settle_let_it_ride,
    settle_three_card_poker,
    settle_ultimate_texas_holdem,
)

C = parse_cards
UTH_BONUS = operator_paytable(
    "ultimate-texas-holdem", "bonus", "Rules Submission", {"three-of-a-kind": "5 to 1"}
)


def placed(s: Settlement) -> list[tuple[int, str]]:
    return [(r.seat, r.wager) for r in s.results]


def test_three_card_poker_every_wager_in_649a11c_order() -> None:
    """649a.11(c): from the dealer's right, each player's Ante and Play (with the Ante Bonus,
    649a.12(b)), Pair Plus (c)(4), Progressive Payout (c)(5), Six Card Bonus (c)(6); a fold
    forfeits the Ante, Pair Plus and Progressive Payout, not the Six Card Bonus (649a.11(b))."""
    rules = TcpRules(seats=7, progressive="A", six_card_bonus="A")
    players = [
        TcpSeat(1, C("2c5d9h"), ante=100, play=True),
        # Pair Plus without an Ante:
        TcpSeat(3, C("3c6d8s"), pair_plus=100, progressive=100, six_card_bonus=100),
        # folds (no Play Wager):
        TcpSeat(5, C("4c7dJh"), ante=100, pair_plus=100, progressive=100, six_card_bonus=100),
        # three eights:
        TcpSeat(7, C("8h8c8d"), 100, True, pair_plus=100, progressive=100, six_card_bonus=100),
    ]
    s = settle_three_card_poker(rules, players, C("QsTd2s"), LocalMeter(cents=250_000))
    assert placed(s) == [
        (7, "ante"),
        (7, "play"),
        (7, "ante-bonus"),  # the bonus on the Ante, 4 to 1 for three-of-a-kind
        (7, "pair-plus"),
        (7, "progressive"),
        (7, "six-card-bonus"),
        (5, "ante"),
        (5, "pair-plus"),
        (5, "progressive"),
        (5, "six-card-bonus"),
        (3, "pair-plus"),
        (3, "progressive"),
        (3, "six-card-bonus"),
        (1, "ante"),
        (1, "play"),
    ]
    results = {(r.seat, r.wager): r for r in s.results}
    assert (results[7, "progressive"].outcome, results[7, "progressive"].paid_cents) == (
        Outcome.WIN,
        60 * 100,  # 649a.12(e)(1) paytable A: three-of-a-kind 60 for 1
    )
    assert results[5, "progressive"].outcome is Outcome.FORFEIT  # 649a.11(b)(2)
    assert results[3, "progressive"].outcome is Outcome.LOSE
    assert results[5, "six-card-bonus"].outcome is Outcome.LOSE  # settled, not forfeited


def test_ultimate_texas_holdem_every_wager_in_653a11_order() -> None:
    """653a.11 (2019): Ante, Blind and Play (h), Trips (i), Bad Beat Bonus (j), Progressive
    Payout (k), Six Card Bonus (m); a fold collects the Ante, Blind and Bad Beat (f)(2)."""
    rules = UthRules(seats=6, progressive=True, bad_beat=UTH_BONUS, six_card_bonus=UTH_BONUS)
    extra = C("2d3d4d5d")
    every = {"trips": 100, "bad_beat": 100, "progressive": 100, "six_card_bonus": 100}
    players = [
        UthSeat(2, C("7c8c"), ante=100, play_multiple=1),
        UthSeat(4, C("9s9h"), ante=100, play_multiple=0, six_card_cards=extra, **every),
        UthSeat(6, C("KhKd"), ante=100, play_multiple=4, six_card_cards=extra, **every),
    ]
    s = settle_ultimate_texas_holdem(
        rules, players, board=C("Kc9d2s6hJc"), dealer=C("AhQs"), meter=LocalMeter(cents=1_000_000)
    )
    assert placed(s) == [
        (6, "ante"),
        (6, "blind"),
        (6, "play"),
        (6, "trips"),
        (6, "bad-beat"),
        (6, "progressive"),
        (6, "six-card-bonus"),
        (4, "ante"),
        (4, "blind"),
        (4, "bad-beat"),
        (4, "trips"),
        (4, "progressive"),
        (4, "six-card-bonus"),
        (2, "ante"),
        (2, "blind"),
        (2, "play"),
    ]
    results = {(r.seat, r.wager): r for r in s.results}
    progressive = results[6, "progressive"]  # K-K-K on the flop: 9 for 1 (653a.12(d)(1))
    assert (progressive.outcome, progressive.hand, progressive.paid_cents) == (
        Outcome.WIN,
        Hand.THREE_OF_A_KIND,
        900,
    )
    assert results[4, "bad-beat"].outcome is Outcome.FORFEIT


def test_let_it_ride_every_wager_in_643a11f_order() -> None:
    """643a.11(f)(3): all Let It Ride Poker Wagers of the player, then the Bonus and the
    Three Card Bonus; withdrawn bets are returned (643a.11(b), (d))."""
    rules = LirRules(seats=7, bonus="C", three_card_bonus="A")
    players = [
        LirSeat(
            2,
            C("2c7d9h"),
            bet=500,
            withdraw_bet_1=True,
            withdraw_bet_2=True,
            bonus=100,
            three_card_bonus=100,
        ),
        LirSeat(6, C("TcTd4h"), bet=500, bonus=100, three_card_bonus=100),
    ]
    s = settle_let_it_ride(rules, players, community=C("Ks3s"))
    wagers = ["bet-1", "bet-2", "bet-3", "bonus", "three-card-bonus"]
    assert placed(s) == [(6, w) for w in wagers] + [(2, w) for w in wagers]
    assert [r.outcome for r in s.results if r.seat == 2][:2] == [Outcome.WITHDRAWN] * 2


@pytest.mark.parametrize(
    ("settle", "message"),
    [
        (
            lambda: settle_three_card_poker(
                TcpRules(seats=1),
                [TcpSeat(1, C("2c7d9h"), ante=100, play=True, six_card_bonus=100)],
                C("3c8d4h"),
            ),
            r"seat 1: a six-card-bonus wager .* \(649a\.12\(f\)\)",
        ),
        (
            lambda: settle_three_card_poker(
                TcpRules(seats=1),
                [TcpSeat(1, C("2c7d9h"), ante=100, play=True, progressive=100)],
                C("3c8d4h"),
                LocalMeter(cents=100_000),
            ),
            r"seat 1: a progressive wager .* \(649a\.12\(e\)\)",
        ),
        (
            lambda: settle_three_card_poker(
                TcpRules(seats=1, progressive="A"),
                [TcpSeat(1, C("2c7d9h"), ante=100, play=True, progressive=100)],
                C("3c8d4h"),
            ),
            r"no meter was given.*649a\.12\(e\)\(4\)",
        ),
        (
            lambda: settle_three_card_poker(
                TcpRules(seats=1, progressive="A"),
                [TcpSeat(1, C("2c7d9h"), ante=100, play=True, progressive=200)],
                C("3c8d4h"),
                LocalMeter(cents=100_000),
            ),
            r"\$1 or \$5 \(649a\.12\(e\)\(5\)\)",
        ),
        (
            lambda: settle_ultimate_texas_holdem(
                UthRules(seats=1),
                [UthSeat(1, C("2c7d"), ante=100, play_multiple=1, progressive=100)],
                C("3c8d4h5s9c"),
                C("AsAd"),
                LocalMeter(cents=1_000_000),
            ),
            r"seat 1: a progressive wager .* \(653a\.7\(d\)\(3\), 653a\.12\(d\)\)",
        ),
        (
            lambda: settle_ultimate_texas_holdem(
                UthRules(seats=1, progressive=True),
                [UthSeat(1, C("2c7d"), ante=100, play_multiple=1, progressive=100)],
                C("3c8d4h5s9c"),
                C("AsAd"),
            ),
            r"no meter was given.*653a\.12\(d\)\(4\)",
        ),
        (
            lambda: settle_ultimate_texas_holdem(
                UthRules(seats=1, six_card_bonus=UTH_BONUS),
                [UthSeat(1, C("2c7d"), ante=100, play_multiple=1, six_card_bonus=100)],
                C("3c8d4h5s9c"),
                C("AsAd"),
            ),
            r"four additional cards \(653a\.11\(m\)\)",
        ),
        (
            lambda: settle_let_it_ride(
                LirRules(seats=1), [LirSeat(1, C("2c7d9h"), bet=100, bonus=100)], C("3c8d")
            ),
            r"seat 1: a bonus wager .* \(643a\.12\(b\)\)",
        ),
        (
            lambda: settle_let_it_ride(
                LirRules(seats=1),
                [LirSeat(1, C("2c7d9h"), bet=100, three_card_bonus=100)],
                C("3c8d"),
            ),
            r"seat 1: a three-card-bonus wager .* \(643a\.12\(c\)\)",
        ),
        (
            lambda: settle_let_it_ride(
                LirRules(seats=1, bonus="A"),
                [LirSeat(1, C("2c7d9h"), bet=0, bonus=100)],
                C("3c8d"),
            ),
            r"three Let It Ride Poker Wagers \(643a\.8\(d\)\)",
        ),
    ],
)
def test_a_wager_settlement_cannot_resolve_is_refused(
    settle: Callable[[], Settlement], message: str
) -> None:
    with pytest.raises(SettlementRefused, match=message):
        settle()


def test_a_wager_the_table_does_not_offer_is_a_missing_paytable() -> None:
    seat = LirSeat(1, C("2c7d9h"), bet=100, bonus=100)
    with pytest.raises(MissingPaytable, match="so the table does not offer it"):
        settle_let_it_ride(LirRules(seats=1), [seat], C("3c8d"))
