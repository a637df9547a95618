"""Settlement straight from the text of 649a.11, 653a.11 and 643a.11."""

from __future__ import annotations

import pytest

from tablectl.rules.cards import parse_cards
from tablectl.rules.meters import LocalMeter
from tablectl.rules.paytables import Hand, operator_paytable
from tablectl.rules.progressive import EnvyBonus, ProgressivePayout
from tablectl.rules.settlement import (
    LirRules,
    LirSeat,
    MissingPaytable,
    Outcome,
    Settlement,
    TcpRules,
    TcpSeat,
    UthRules,
    UthSeat,
    lir_minimum_payout_limit_cents,
    settle_let_it_ride,
    settle_three_card_poker,
    settle_ultimate_texas_holdem,
    uth_minimum_payout_limit_cents,
)

C = parse_cards


def nets(s: Settlement, seat: int) -> dict[str, tuple[Outcome, int]]:
    return {k: (r.outcome, r.net_cents) for k, r in s.for_seat(seat).items()}


# --- Three Card Poker ---------------------------------------------------------------------


def test_tcp_dealer_below_queen_high_pays_ante_and_pushes_play() -> None:
    """649a.11(c)(3)(i)."""
    s = settle_three_card_poker(
        TcpRules(seats=3), [TcpSeat(2, C("9h7c4d"), ante=1000, play=True)], C("JsTd8c")
    )
    assert nets(s, 2) == {"ante": (Outcome.WIN, 1000), "play": (Outcome.PUSH, 0)}


def test_tcp_qualifying_dealer_beats_tie_and_loses() -> None:
    dealer = C("QsTd8c")
    players = [
        TcpSeat(1, C("KhKc2d"), ante=500, play=True),
        TcpSeat(2, C("QdTh8s"), ante=500, play=True),  # equal: returned (ii)(C)
        TcpSeat(3, C("Jc9c7h"), ante=500, play=True),
    ]
    s = settle_three_card_poker(TcpRules(seats=3), players, dealer)
    assert nets(s, 1) == {"ante": (Outcome.WIN, 500), "play": (Outcome.WIN, 500)}
    assert nets(s, 2) == {"ante": (Outcome.PUSH, 0), "play": (Outcome.PUSH, 0)}
    assert nets(s, 3) == {"ante": (Outcome.LOSE, -500), "play": (Outcome.LOSE, -500)}
    assert [r.seat for r in s.results][:2] == [3, 3]  # from the dealer's right


def test_tcp_ante_bonus_is_paid_even_when_the_dealer_wins() -> None:
    """649a.12(b): a straight loses to the dealer's trips but still earns the bonus."""
    s = settle_three_card_poker(
        TcpRules(seats=1, ante_bonus="A"),
        [TcpSeat(1, C("4h5c6d"), ante=100, play=True)],
        C("9s9d9c"),
    )
    assert nets(s, 1) == {
        "ante": (Outcome.LOSE, -100),
        "play": (Outcome.LOSE, -100),
        "ante-bonus": (Outcome.WIN, 100),
    }


def test_tcp_fold_forfeits_ante_and_pair_plus_but_not_six_card_bonus() -> None:
    """649a.11(b)(1), (3)."""
    rules = TcpRules(seats=2, six_card_bonus="A")
    player = TcpSeat(1, C("2h2c7d"), ante=100, play=False, pair_plus=100, six_card_bonus=100)
    s = settle_three_card_poker(rules, [player], C("2s2d7s"))  # six cards: 2222 + 77
    assert nets(s, 1) == {
        "ante": (Outcome.FORFEIT, -100),
        "pair-plus": (Outcome.FORFEIT, -100),
        "six-card-bonus": (Outcome.WIN, 50 * 100),
    }


def test_tcp_pair_plus_pays_whatever_the_dealer_has() -> None:
    s = settle_three_card_poker(
        TcpRules(seats=1, pair_plus="D"), [TcpSeat(1, C("5h6h7h"), pair_plus=200)], C("AsAdAc")
    )
    assert nets(s, 1) == {"pair-plus": (Outcome.WIN, 40 * 200)}


def test_tcp_super_royal_only_on_paytable_e() -> None:
    player, dealer = C("AdKdQd"), C("JdTd9d")
    s = settle_three_card_poker(
        TcpRules(seats=1, six_card_bonus="E"),
        [TcpSeat(1, player, pair_plus=100, six_card_bonus=100)],
        dealer,
    )
    # 649a.12(f) paytable E: "$1,000,000" among "to 1" odds on a wager that stays on the
    # layout: won on a $1 wager, the wager returned besides.
    six = s.for_seat(1)["six-card-bonus"]
    assert (six.net_cents, six.paid_cents) == (1_000_000_00, 1_000_000_00 + 100)
    assert six.hand is Hand.SUPER_ROYAL_DIAMONDS
    s = settle_three_card_poker(
        TcpRules(seats=1, six_card_bonus="E"),
        [TcpSeat(1, player, pair_plus=100, six_card_bonus=500)],
        dealer,
    )
    six = s.for_seat(1)["six-card-bonus"]
    assert (six.net_cents, six.paid_cents) == (5 * 1_000_000_00, 5 * 1_000_000_00 + 500)
    s = settle_three_card_poker(
        TcpRules(seats=1, six_card_bonus="E"),
        [TcpSeat(1, C("AhKhQh"), pair_plus=100, six_card_bonus=100)],
        C("JhTh9h"),
    )
    six = s.for_seat(1)["six-card-bonus"]
    assert (six.hand, six.net_cents, six.paid_cents) == (
        Hand.SUPER_ROYAL,
        100_000_00,
        100_000_00 + 100,
    )
    s = settle_three_card_poker(
        TcpRules(seats=1, six_card_bonus="D"),
        [TcpSeat(1, player, pair_plus=100, six_card_bonus=100)],
        dealer,
    )
    assert s.for_seat(1)["six-card-bonus"].hand is Hand.ROYAL_FLUSH
    assert s.for_seat(1)["six-card-bonus"].net_cents == 1000 * 100


@pytest.mark.parametrize(
    ("wager", "spades", "other"), [(100, 10_000, 2_500), (500, 50_000, 12_500)]
)
def test_tcp_envy_bonuses_at_one_and_five_dollars(wager: int, spades: int, other: int) -> None:
    """649a.12(e)(5): one bonus per other qualifying hand; none for one's own or the dealer's."""
    rules = TcpRules(seats=4, progressive="A")
    players = [
        TcpSeat(1, C("AsKsQs"), ante=100, play=True, progressive=wager),
        TcpSeat(2, C("AhKhQh"), ante=100, play=True, progressive=wager),
        TcpSeat(3, C("2c7d9h"), ante=100, play=False, progressive=wager),  # folded: still envies
        TcpSeat(4, C("3c8d4h"), ante=100, play=True),  # no progressive wager: no envy
    ]
    s = settle_three_card_poker(rules, players, C("AdKdQd"), LocalMeter(cents=250_000))
    envy = sorted(
        (p.seat, p.for_seat, p.amount_cents) for p in s.progressive if isinstance(p, EnvyBonus)
    )
    assert envy == [(1, 2, other), (2, 1, spades), (3, 1, spades), (3, 2, other)]
    hits = [(p.seat, p.amount_cents) for p in s.progressive if isinstance(p, ProgressivePayout)]
    assert hits == [(2, 500 * wager), (1, 250_000)]
    assert s.meter == LocalMeter(cents=100_000)


# --- Ultimate Texas Hold 'Em ---------------------------------------------------------------


def test_uth_blind_pushes_on_a_win_below_a_straight() -> None:
    """653a.11(h)(2)(ii): the Blind is returned when the winning hand is below the table."""
    s = settle_ultimate_texas_holdem(
        UthRules(seats=1),
        [UthSeat(1, C("AhAc"), ante=500, play_multiple=4)],
        board=C("Ks9d5c3h2s"),
        dealer=C("KcQd"),
    )
    assert nets(s, 1) == {
        "ante": (Outcome.WIN, 500),
        "blind": (Outcome.PUSH, 0),
        "play": (Outcome.WIN, 2000),
    }


def test_uth_non_qualifying_dealer_returns_the_ante() -> None:
    """653a.11(h)(1): below a pair the Ante is returned; Blind and Play as in (h)(2)."""
    s = settle_ultimate_texas_holdem(
        UthRules(seats=2, blind="A"),
        [
            UthSeat(1, C("6h7h"), ante=100, play_multiple=1),
            UthSeat(2, C("Jc3c"), ante=100, play_multiple=2),
        ],
        board=C("8s9dTc2h4s"),
        dealer=C("AcQd"),
    )
    assert nets(s, 1) == {
        "ante": (Outcome.PUSH, 0),
        "blind": (Outcome.WIN, 100),
        "play": (Outcome.WIN, 100),
    }
    assert nets(s, 2) == {
        "ante": (Outcome.PUSH, 0),
        "blind": (Outcome.LOSE, -100),
        "play": (Outcome.LOSE, -200),
    }


def test_uth_blind_three_to_two_and_trips_for_a_folded_player() -> None:
    s = settle_ultimate_texas_holdem(
        UthRules(seats=2, blind="B", trips="A"),
        [
            UthSeat(1, C("AhJh"), ante=200, play_multiple=3),
            UthSeat(2, C("9s9c"), ante=100, play_multiple=0, trips=100),
        ],
        board=C("2h5h9h9dKc"),
        dealer=C("QdQs"),
    )
    assert nets(s, 1)["blind"] == (Outcome.WIN, 300)  # flush: 3 to 2
    assert nets(s, 2) == {
        "ante": (Outcome.FORFEIT, -100),
        "blind": (Outcome.FORFEIT, -100),
        "trips": (Outcome.WIN, 30 * 100),  # four nines, paid although folded (653a.11(f)(2)(i))
    }


def test_uth_royal_paid_first_leaves_the_straight_flush_a_share_of_the_reset() -> None:
    """653a.12(d)(4): each hit is paid at the meter as it stands at that player's turn; the
    royal (100 %) restarts the meter, so the next straight flush takes 10 % of the reset."""
    rules = UthRules(seats=6, progressive=True, reset_cents=1_000_000)
    players = [
        UthSeat(5, C("KhAh"), ante=100, play_multiple=1, progressive=100),  # royal on the flop
        UthSeat(2, C("9h8h"), ante=100, play_multiple=1, progressive=100),  # 8-Q straight flush
    ]
    s = settle_ultimate_texas_holdem(
        rules, players, board=C("ThJhQh2c3d"), dealer=C("9c8d"), meter=LocalMeter(cents=3_456_789)
    )
    hits = [(p.seat, p.amount_cents) for p in s.progressive if isinstance(p, ProgressivePayout)]
    assert hits == [(5, 3_456_789), (2, 100_000)]
    assert s.meter == LocalMeter(cents=900_000)
    envy = sorted((p.seat, p.amount_cents) for p in s.progressive if isinstance(p, EnvyBonus))
    assert envy == [(2, 100_000), (5, 30_000)]  # 653a.12(d)(5): $1,000 royal, $300 SF


def test_uth_straight_flush_paid_first_reduces_what_the_royal_takes() -> None:
    rules = UthRules(seats=4, progressive=True)
    players = [
        UthSeat(1, C("AhKh"), ante=100, play_multiple=4, progressive=500),
        UthSeat(4, C("9h8h"), ante=100, play_multiple=4, progressive=100),
    ]
    s = settle_ultimate_texas_holdem(
        rules,
        players,
        board=C("QhJhTh2c3d"),
        dealer=C("4s4d"),
        meter=LocalMeter(cents=2_000_000, carry=1234),
    )
    hits = [
        (p.seat, p.hand, p.amount_cents) for p in s.progressive if isinstance(p, ProgressivePayout)
    ]
    assert hits == [(4, Hand.STRAIGHT_FLUSH, 200_000), (1, Hand.ROYAL_FLUSH, 1_800_000)]
    assert s.meter == LocalMeter(cents=1_000_000, carry=1234)
    envy = sorted(
        (p.seat, p.for_seat, p.amount_cents) for p in s.progressive if isinstance(p, EnvyBonus)
    )
    assert envy == [(1, 4, 150_000), (4, 1, 100_000)]  # $5 wager envies a SF: $1,500


def test_uth_folded_progressive_is_settled_but_earns_no_one_an_envy_bonus() -> None:
    """653a.11(k) (2019): the Progressive Payout Wager is paid "irrespective of whether the
    player's hand outranks the dealer's hand", so a fold does not forfeit it; a folded hand is
    never shown, so it earns no one an Envy Bonus (649a.11(c), applied alike in UTH), while
    the folded player still receives one for another player's hand (653a.11(k)(5))."""
    rules = UthRules(seats=6, progressive=True, reset_cents=1_000_000)
    players = [
        UthSeat(5, C("AhKh"), ante=100, play_multiple=0, progressive=100),  # royal, folded
        UthSeat(3, C("2c3d"), ante=100, play_multiple=1, progressive=100),
        UthSeat(1, C("9h8h"), ante=100, play_multiple=1, progressive=100),  # straight flush
    ]
    s = settle_ultimate_texas_holdem(
        rules, players, board=C("QhJhTh4c5d"), dealer=C("6s6d"), meter=LocalMeter(cents=2_500_000)
    )
    hits = [
        (p.seat, p.hand, p.amount_cents) for p in s.progressive if isinstance(p, ProgressivePayout)
    ]
    assert hits == [(5, Hand.ROYAL_FLUSH, 2_500_000), (1, Hand.STRAIGHT_FLUSH, 100_000)]
    envy = [(p.seat, p.for_seat, p.amount_cents) for p in s.progressive if isinstance(p, EnvyBonus)]
    assert envy == [(5, 1, 30_000), (3, 1, 30_000)]  # nobody is paid for seat 5's royal
    assert nets(s, 5) == {
        "ante": (Outcome.FORFEIT, -100),
        "blind": (Outcome.FORFEIT, -100),
        "progressive": (Outcome.WIN, 2_500_000 - 100),
    }
    assert s.meter == LocalMeter(cents=900_000)


def test_uth_2019_progressive_uses_two_cards_and_the_flop() -> None:
    """653a.11(k), 2019 text: the progressive is decided on the two cards and the Flop."""
    rules = UthRules(seats=1, progressive=True)
    player = UthSeat(1, C("7c7d"), ante=100, play_multiple=1, progressive=100)
    # Trips only come with the turn: on the flop alone the hand is a pair.
    s = settle_ultimate_texas_holdem(
        rules, [player], board=C("2s5hKd7h9c"), dealer=C("3c4c"), meter=LocalMeter(cents=1_000_000)
    )
    assert s.progressive == []
    s = settle_ultimate_texas_holdem(
        rules, [player], board=C("7h5hKd2s9c"), dealer=C("3c4c"), meter=LocalMeter(cents=1_000_000)
    )
    assert [(p.hand, p.amount_cents) for p in s.progressive] == [(Hand.THREE_OF_A_KIND, 900)]


def test_uth_payout_limit_spares_the_progressive() -> None:
    rules = UthRules(
        seats=1,
        trips="A",
        payout_limit_cents=5_000_000,
        minimum_wager_cents=2_500,  # $25: 555 x $25 = $13,875 < $50,000
        progressive=True,
    )
    player = UthSeat(1, C("AsKs"), ante=10_000, play_multiple=4, trips=100_000, progressive=100)
    s = settle_ultimate_texas_holdem(
        rules, [player], board=C("QsJsTs2d3c"), dealer=C("2h2c"), meter=LocalMeter(cents=9_000_000)
    )
    results = s.for_seat(1)
    limited = sum(r.net_cents for r in results.values() if r.wager != "progressive")
    assert limited == 5_000_000  # 653a.12(e)
    assert results["trips"].note == "payout limited to $50,000"
    assert [p.amount_cents for p in s.progressive] == [9_000_000]
    assert (results["progressive"].net_cents, results["progressive"].paid_cents) == (
        9_000_000 - 100,
        9_000_000,
    )


# --- Let It Ride ---------------------------------------------------------------------------


def test_lir_both_bets_withdrawn() -> None:
    """643a.11(b), (d): withdrawn bets are simply returned; Bet 3 is settled."""
    s = settle_let_it_ride(
        LirRules(seats=2),
        [
            LirSeat(1, C("2c7d9h"), bet=500, withdraw_bet_1=True, withdraw_bet_2=True),
            LirSeat(2, C("TcTd4h"), bet=500, withdraw_bet_1=True, withdraw_bet_2=True),
        ],
        community=C("Ks3s"),
    )
    assert nets(s, 1) == {
        "bet-1": (Outcome.WITHDRAWN, 0),
        "bet-2": (Outcome.WITHDRAWN, 0),
        "bet-3": (Outcome.LOSE, -500),
    }
    assert nets(s, 2)["bet-3"] == (Outcome.WIN, 500)  # a pair of tens pays 1 to 1


def test_lir_pays_every_bet_that_rides_and_the_bonuses() -> None:
    s = settle_let_it_ride(
        LirRules(seats=1, base="B", bonus="B", three_card_bonus="D"),
        [LirSeat(1, C("AhKhQh"), bet=100, bonus=100, three_card_bonus=100)],
        community=C("JhTh"),
    )
    assert nets(s, 1) == {
        "bet-1": (Outcome.WIN, 500 * 100),
        "bet-2": (Outcome.WIN, 500 * 100),
        "bet-3": (Outcome.WIN, 500 * 100),
        "bonus": (Outcome.WIN, 20_000_00 - 100),  # $20,000 in all: the $1 was collected
        "three-card-bonus": (Outcome.WIN, 50 * 100),
    }


@pytest.mark.parametrize(
    ("bonus_cents", "cards", "community", "outcome", "paid_cents"),
    [
        (100, "AhKhQh", "JhTh", Outcome.WIN, 25_000_00),  # royal flush, A: $25,000 in all
        (500, "AhKhQh", "JhTh", Outcome.WIN, 5 * 25_000_00),  # $5: five times the $1 amount
        (100, "AhAsQh", "Ad9c", Outcome.WIN, 5_00),  # three aces: $5 in all, net +$4
        (100, "AhAsQh", "2c9d", Outcome.LOSE, 0),  # a pair of aces pays nothing on A
    ],
)
def test_lir_bonus_amounts_are_all_the_winner_receives(
    bonus_cents: int, cards: str, community: str, outcome: Outcome, paid_cents: int
) -> None:
    """643a.12(b), 643a.8(b): the Bonus Wager is collected into the table inventory before the
    deal, so the amount of the paytable is all a winner receives; amounts are per $1."""
    s = settle_let_it_ride(
        LirRules(seats=1, bonus="A"),
        [LirSeat(1, C(cards), bet=100, bonus=bonus_cents)],
        community=C(community),
    )
    bonus = s.for_seat(1)["bonus"]
    assert (bonus.outcome, bonus.paid_cents, bonus.net_cents) == (
        outcome,
        paid_cents,
        paid_cents - bonus_cents,
    )


def test_lir_bonus_pair_of_tens_on_paytable_b_gives_back_exactly_the_dollar() -> None:
    """643a.12(b) paytable B: "Pair—Tens or better $1", received in all for the collected $1."""
    s = settle_let_it_ride(
        LirRules(seats=1, bonus="B"), [LirSeat(1, C("TcTd4h"), bet=500, bonus=100)], C("Ks3s")
    )
    bonus = s.for_seat(1)["bonus"]
    assert (bonus.outcome, bonus.paid_cents, bonus.net_cents) == (Outcome.WIN, 100, 0)


def test_one_deck_means_no_card_twice() -> None:
    with pytest.raises(ValueError, match="same card"):
        settle_let_it_ride(LirRules(seats=1), [LirSeat(1, C("AhKhQh"), bet=100)], C("AhTh"))


BAD_BEAT = operator_paytable(
    "ultimate-texas-holdem",
    "bad-beat",
    "653a.12(g), Rules Submission",
    {"four-of-a-kind": "500 to 1", "full-house": "50 to 1", "three-of-a-kind": "8 to 1"},
)


def test_uth_bad_beat_pays_the_losing_hand_on_either_side() -> None:
    """653a.11(j), 2019 text."""
    rules = UthRules(seats=2, bad_beat=BAD_BEAT)
    players = [
        UthSeat(1, C("5c5d"), ante=100, play_multiple=1, bad_beat=100),  # trips, loses
        UthSeat(2, C("JhJd"), ante=100, play_multiple=1, bad_beat=100),
    ]  # full house wins
    s = settle_ultimate_texas_holdem(rules, players, board=C("5hJc9s9d2c"), dealer=C("9c9h"))
    assert nets(s, 1)["bad-beat"] == (Outcome.WIN, 5000)  # 55599 full house loses to quads
    assert nets(s, 2)["bad-beat"] == (Outcome.WIN, 5000)  # so does JJJ99
    s = settle_ultimate_texas_holdem(rules, players, board=C("5hJc8s2d3c"), dealer=C("9c9h"))
    assert nets(s, 1)["bad-beat"] == (Outcome.LOSE, -100)  # trips beat a pair: no bad beat
    s = settle_ultimate_texas_holdem(rules, players, board=C("5hJc9s2d3c"), dealer=C("9c9h"))
    assert nets(s, 1)["bad-beat"] == (Outcome.WIN, 800)  # player's trips lost to the dealer's
    assert nets(s, 2)["bad-beat"] == (Outcome.WIN, 800)  # beat the dealer's trips of nines


def test_uth_fold_collects_the_bad_beat_bonus_wager() -> None:
    """653a.11(f)(2), 2019 text: "Folds, the Ante, Blind and Bad Beat Bonus Wagers of the
    player shall be collected" -- even when the folded hand would have been a bad beat."""
    rules = UthRules(seats=1, bad_beat=BAD_BEAT)
    player = UthSeat(1, C("5c5d"), ante=100, play_multiple=0, bad_beat=100, trips=100)
    s = settle_ultimate_texas_holdem(rules, [player], board=C("5hJc9s9d2c"), dealer=C("9c9h"))
    assert [(r.wager, r.outcome, r.net_cents, r.paid_cents) for r in s.results] == [
        ("ante", Outcome.FORFEIT, -100, 0),
        ("blind", Outcome.FORFEIT, -100, 0),
        ("bad-beat", Outcome.FORFEIT, -100, 0),
        ("trips", Outcome.WIN, 900, 1000),  # 653a.11(f)(2)(i): the Trips is still settled
    ]


def test_uth_operator_paytables_have_no_default() -> None:
    player = UthSeat(1, C("5c5d"), ante=100, play_multiple=1, bad_beat=100)
    with pytest.raises(MissingPaytable, match="no bad-beat paytable is configured"):
        settle_ultimate_texas_holdem(UthRules(seats=1), [player], C("5hJc9s2d3c"), C("9c9h"))
    with pytest.raises(ValueError, match="unknown hand 'quads'"):
        operator_paytable("ultimate-texas-holdem", "bad-beat", "x", {"quads": "500 to 1"})
    with pytest.raises(ValueError, match="is not a payout"):
        operator_paytable("ultimate-texas-holdem", "bad-beat", "x", {"flush": "lots"})


def test_uth_six_card_bonus_uses_the_four_extra_cards() -> None:
    table = operator_paytable(
        "ultimate-texas-holdem",
        "six-card-bonus",
        "653a.12(f)",
        {"flush": "$50", "three-of-a-kind": "5 to 1"},
    )
    player = UthSeat(
        1, C("Ah2h"), ante=100, play_multiple=0, six_card_bonus=100, six_card_cards=C("5h9hKh3c")
    )
    s = settle_ultimate_texas_holdem(
        UthRules(seats=1, six_card_bonus=table), [player], board=C("2c3d4s8d9c"), dealer=C("TcJd")
    )
    assert nets(s, 1)["six-card-bonus"] == (Outcome.WIN, 5000)


@pytest.mark.parametrize(
    ("variant", "ante", "pair_plus", "ok"),
    [
        (1, 100, 100, True),
        (1, 100, 200, False),
        (2, 100, 200, True),
        (2, 100, 300, False),
        (3, 100, 500, True),
        (3, 100, 600, False),
        (3, 0, 100, False),
    ],
)
def test_tcp_649a7e_ante_to_pair_plus_rules(
    variant: int, ante: int, pair_plus: int, ok: bool
) -> None:
    rules = TcpRules(seats=1, variant_649a7e=variant)
    seat = TcpSeat(1, C("2c7d9h"), ante=ante, play=bool(ante), pair_plus=pair_plus)
    if ok:
        settle_three_card_poker(rules, [seat], C("3c8d4h"))
    else:
        with pytest.raises(ValueError, match=r"649a\.7\(e\)"):
            settle_three_card_poker(rules, [seat], C("3c8d4h"))


def test_tcp_649a7e_ante_bonus_pays_the_spades_mini_royal() -> None:
    rules = TcpRules(seats=1, variant_649a7e=1, ante_bonus="B")
    s = settle_three_card_poker(rules, [TcpSeat(1, C("AsKsQs"), ante=100, play=True)], C("2c7d9h"))
    assert nets(s, 1)["ante-bonus"] == (Outcome.WIN, 50 * 100)  # 649a.12(c)


@pytest.mark.parametrize(("letter", "bonus"), [("A", (Outcome.WIN, 100)), ("B", None), ("C", None)])
def test_tcp_649a7e_ante_bonus_pays_a_straight_on_paytable_a_only(
    letter: str, bonus: tuple[Outcome, int] | None
) -> None:
    """649a.12(c): "Straight 1 to 1" has a single column (paytable A); the 2011 text prints
    "1 to 1 N/A N/A". Paid whether or not the hand beats the dealer's."""
    rules = TcpRules(seats=1, variant_649a7e=1, ante_bonus=letter)
    s = settle_three_card_poker(rules, [TcpSeat(1, C("4h5c6d"), ante=100, play=True)], C("9s9d9c"))
    assert nets(s, 1).get("ante-bonus") == bonus
    assert nets(s, 1)["ante"] == (Outcome.LOSE, -100)


@pytest.mark.parametrize(
    ("blind", "trips", "minimum", "least"),
    [
        ("A", "A", 500, 5_000_000),  # $5: 555 x $5 = $2,775, so $50,000
        ("A", "A", 9_000, 5_000_000),  # $90: $49,950, still $50,000
        ("A", "A", 10_000, 5_550_000),  # $100: Ante 1 + Blind 500 + Play 4 + Trips 50 = 555
        ("B", "D", 10_000, 5_550_000),  # royal flush rows are the same on every paytable
        ("A", None, 10_000, 5_050_000),  # no Trips offered: 1 + 500 + 4 = 505
    ],
)
def test_uth_minimum_payout_limit(blind: str, trips: str | None, minimum: int, least: int) -> None:
    """653a.12(e): "at least $50,000 or the maximum amount that one patron could win per round
    when betting the minimum wager, whichever is greater" -- a royal flush with Ante, Blind and
    Trips at the minimum and the Play at 4x the Ante (653a.11(b))."""
    assert uth_minimum_payout_limit_cents(blind, trips, minimum) == least


@pytest.mark.parametrize(
    ("base", "minimum", "least"),
    [
        ("A", 1_000, 5_000_000),
        ("A", 2_500, 7_500_000),
        ("B", 2_500, 5_000_000),
        ("B", 5_000, 7_500_000),
    ],
)
def test_lir_minimum_payout_limit(base: str, minimum: int, least: int) -> None:
    """643a.12(d): the three Let It Ride Poker Wagers at the minimum, all riding on a royal
    flush: 3 x 1,000 to 1 (paytable A) or 3 x 500 to 1 (B), or $50,000 if greater."""
    assert lir_minimum_payout_limit_cents(base, minimum) == least


def test_a_payout_limit_below_the_minimum_is_an_error_naming_the_rule() -> None:
    """653a.12(e), 643a.12(d): never silently applied."""
    with pytest.raises(ValueError, match=r"below the \$55,500\.00 minimum of 653a\.12\(e\)"):
        UthRules(seats=6, payout_limit_cents=5_549_999, minimum_wager_cents=10_000)
    UthRules(seats=6, payout_limit_cents=5_550_000, minimum_wager_cents=10_000)
    with pytest.raises(ValueError, match=r"below the \$50,000\.00 minimum of 643a\.12\(d\)"):
        LirRules(seats=6, payout_limit_cents=4_999_999, minimum_wager_cents=500)
    with pytest.raises(ValueError, match=r"needs the table.s minimum_wager: 653a\.12\(e\)"):
        UthRules(seats=6, payout_limit_cents=10_000_000)
    with pytest.raises(ValueError, match=r"needs the table.s minimum_wager: 643a\.12\(d\)"):
        LirRules(seats=6, payout_limit_cents=10_000_000)
    with pytest.raises(ValueError, match="the minimum wager is a positive amount"):
        lir_minimum_payout_limit_cents("A", 0)


def test_lir_payout_limit_caps_the_three_bets_not_the_bonuses() -> None:
    """643a.12(d): the limit "shall apply only to payouts of Let It Ride Poker Wagers" and "may
    not apply to payouts of Let It Ride Bonus Wagers ... or Three Card Bonus Wagers"."""
    rules = LirRules(
        seats=1,
        bonus="A",
        three_card_bonus="D",
        payout_limit_cents=7_500_000,
        minimum_wager_cents=2_500,
    )
    player = LirSeat(1, C("AhKhQh"), bet=10_000, bonus=100, three_card_bonus=10_000)
    s = settle_let_it_ride(rules, [player], community=C("JhTh"))
    assert nets(s, 1) == {
        "bet-1": (Outcome.WIN, 7_500_000),  # 1,000 to 1 on $100 is $100,000: capped
        "bet-2": (Outcome.WIN, 0),
        "bet-3": (Outcome.WIN, 0),
        "bonus": (Outcome.WIN, 25_000_00 - 100),
        "three-card-bonus": (Outcome.WIN, 50 * 10_000),  # mini-royal 50 to 1 (643a.12(c) D)
    }
    assert s.for_seat(1)["bet-3"].paid_cents == 10_000  # the wager itself is returned


def test_uth_trips_the_table_does_not_offer_is_refused() -> None:
    player = UthSeat(1, C("5c5d"), ante=100, play_multiple=1, trips=100)
    with pytest.raises(MissingPaytable, match=r"trips .* \(653a\.12\(c\)\)"):
        settle_ultimate_texas_holdem(
            UthRules(seats=1, trips=None), [player], C("5hJc9s2d3c"), C("9c9h")
        )
