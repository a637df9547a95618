"""Paytables as data: what each kind of pay means for the cents a winner receives."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tablectl.rules.paytables import (
    LIR,
    PAYTABLES,
    TCP,
    Hand,
    Pay,
    PayKind,
    dollars_for,
    dollars_to,
    for_,
    parse_pay,
    to,
)


@pytest.mark.parametrize(
    ("pay", "wager_cents", "paid_cents"),
    [
        (to(3, 2), 500, 1250),  # 3 to 2: won 7.50 and the 5.00 returned
        (to(3, 2), 333, 832),  # 4.995 won: the half cent is not paid
        (for_(60), 100, 6000),  # 649a.12(e): 60 for 1 is 60 in all
        (dollars_to(100_000), 100, 100_000_00 + 100),  # won, the wager returned besides
        (dollars_for(25_000), 100, 25_000_00),  # received in all: the wager was collected
        (dollars_for(25_000), 500, 125_000_00),  # a $5 wager: five times the $1 amount
        (dollars_for(5), 250, 12_50),
    ],
)
def test_what_a_winning_wager_receives_in_all(pay: Pay, wager_cents: int, paid_cents: int) -> None:
    assert pay.paid_cents(wager_cents) == paid_cents


def test_let_it_ride_bonus_amounts_are_received_in_all() -> None:
    """643a.12(b) with 643a.8(b): the Bonus Wager is collected before the deal, so the amounts
    are all a winner receives. Paytable A's royal flush: $25,000 for a $1 wager."""
    for letter in "ABC":
        table = PAYTABLES[LIR, "bonus", letter]
        assert {p.kind for p in table.pays.values()} == {PayKind.AMOUNT_FOR}
    assert PAYTABLES[LIR, "bonus", "A"].pays[Hand.ROYAL_FLUSH].paid_cents(100) == 25_000_00
    assert str(PAYTABLES[LIR, "bonus", "A"].pays[Hand.ROYAL_FLUSH]) == "$25,000 for $1"


def test_six_card_bonus_super_royals_are_won_with_the_wager_returned() -> None:
    """649a.12(f) paytable E: the Super Royal amounts sit among "to 1" odds on a wager that is
    not collected before the deal (649a.8(b) collects only the Progressive Payout Wager)."""
    table = PAYTABLES[TCP, "six-card-bonus", "E"]
    assert table.pays[Hand.SUPER_ROYAL_DIAMONDS] == dollars_to(1_000_000)
    assert table.pays[Hand.SUPER_ROYAL] == dollars_to(100_000)
    assert table.pays[Hand.SUPER_ROYAL].total_per_unit() == Fraction(100_001)


@pytest.mark.parametrize(
    ("text", "kind", "cents"),
    [
        ("$1,000", PayKind.AMOUNT_TO, 1_000_00),
        ("$1,000 to $1", PayKind.AMOUNT_TO, 1_000_00),
        ("$25,000 for $1", PayKind.AMOUNT_FOR, 25_000_00),
    ],
)
def test_operator_amounts_parse_and_print(text: str, kind: PayKind, cents: int) -> None:
    pay = parse_pay(text)
    assert (pay.kind, pay.cents) == (kind, cents)
    assert parse_pay(str(pay)) == pay


def test_a_meter_share_has_no_fixed_total() -> None:
    with pytest.raises(ValueError, match="progressive meter"):
        parse_pay("10% of meter").total_per_unit()
