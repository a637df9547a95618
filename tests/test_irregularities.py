"""Irregularities as the three chapters rule them."""

from __future__ import annotations

import pytest

from tablectl.rules.irregularities import Irregularity, NotApplicable, Ruling, rule_on
from tablectl.rules.paytables import LIR, TCP, UTH

Irr = Irregularity
VOID = {"void_round": True, "return_wagers": True, "reshuffle": True}


@pytest.mark.parametrize("game", [TCP, UTH, LIR])
def test_one_face_up_card_is_discarded_more_void_the_round(game: str) -> None:
    section = {TCP: "649a", UTH: "653a", LIR: "643a"}[game]
    assert rule_on(game, Irr.CARDS_FACE_UP) == Ruling(f"{section}.13(a)", discard_card=True)
    assert rule_on(game, Irr.CARDS_FACE_UP, face_up_cards=2) == Ruling(f"{section}.13(a)", **VOID)


def test_uth_face_up_cards_after_the_first_two_still_settle_trips() -> None:
    ruling = rule_on(
        UTH, Irr.CARDS_FACE_UP, face_up_cards=2, initial_two_dealt=True, trips_placed=True
    )
    assert ruling.void_round and ruling.trips_still_settle


def test_exposed_dealer_card() -> None:
    assert rule_on(TCP, Irr.DEALER_CARD_EXPOSED) == Ruling("649a.13(d)", **VOID)
    uth = rule_on(UTH, Irr.DEALER_CARD_EXPOSED, trips_placed=True)
    assert uth.void_round and uth.trips_still_settle and uth.rule == "653a.13(d)"
    with pytest.raises(NotApplicable):
        rule_on(LIR, Irr.DEALER_CARD_EXPOSED)
    assert rule_on(LIR, Irr.COMMUNITY_CARD_EXPOSED) == Ruling("643a.13(d)", **VOID)


@pytest.mark.parametrize("game", [TCP, UTH, LIR])
def test_devices(game: str) -> None:
    jam = rule_on(game, Irr.SHUFFLER_JAM)
    assert jam.reshuffle and not jam.void_round  # 13(e): reshuffle, the round goes on
    shoe = rule_on(game, Irr.SHOE_JAM)
    assert shoe.void_round and shoe.return_wagers  # 13(f)
    assert rule_on(game, Irr.DEVICE_UNUSABLE).out_of_order_first  # 13(g)
    assert rule_on(game, Irr.CARD_DRAWN_IN_ERROR).use_card_as_next  # 13(b)
    assert rule_on(game, Irr.WRONG_CARD_COUNT).void_round  # 13(c)
