"""Irregularities (649a.13, 653a.13, 643a.13): what the rules say happens next. Pure.

Each ruling is a value the round state machine acts on: void the round and return wagers,
settle only the Trips, discard a card and go on, reshuffle, mark a device out of order.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tablectl.rules.paytables import LIR, TCP, UTH

SECTION = {TCP: "649a.13", UTH: "653a.13", LIR: "643a.13"}


class Irregularity(StrEnum):
    CARDS_FACE_UP = "cards-face-up"  # found face up in the shoe or deck while dealing
    CARD_DRAWN_IN_ERROR = "card-drawn-in-error"  # drawn in error, face not exposed
    WRONG_CARD_COUNT = "wrong-card-count"  # a hand (or the community area) misdealt
    DEALER_CARD_EXPOSED = "dealer-card-exposed"  # TCP and UTH
    COMMUNITY_CARD_EXPOSED = "community-card-exposed"  # Let It Ride, before its turn
    SHUFFLER_JAM = "shuffler-jam"  # jam, stop mid-shuffle, incomplete cycle
    SHOE_JAM = "shoe-jam"  # jam, stopped dealing, failed to deal all cards
    DEVICE_UNUSABLE = "device-unusable"  # shuffler or shoe cannot be used at all


@dataclass(frozen=True, slots=True)
class Ruling:
    rule: str
    void_round: bool = False
    return_wagers: bool = False  # every wager, unless trips_still_settle
    trips_still_settle: bool = False  # UTH: deal the board and settle each Trips Wager
    reshuffle: bool = False
    discard_card: bool = False
    use_card_as_next: bool = False
    out_of_order_first: bool = False  # cover or sign the device before manual play


class NotApplicable(ValueError):
    """The irregularity does not exist in that game (say, a Let It Ride dealer hand)."""


def rule_on(
    game: str,
    what: Irregularity,
    *,
    face_up_cards: int = 1,
    initial_two_dealt: bool = False,
    trips_placed: bool = False,
) -> Ruling:
    """The ruling for one irregularity in one game."""
    if game not in SECTION:
        raise NotApplicable(f"unknown game {game!r}; one of {sorted(SECTION)}")
    s = SECTION[game]
    void = {"void_round": True, "return_wagers": True, "reshuffle": True}
    match what:
        case Irregularity.CARDS_FACE_UP if face_up_cards <= 1:
            return Ruling(f"{s}(a)", discard_card=True)
        case Irregularity.CARDS_FACE_UP:
            # 653a.13(a): once every hand has its two cards, the board is dealt for the Trips.
            trips = game == UTH and initial_two_dealt and trips_placed
            return Ruling(f"{s}(a)", trips_still_settle=trips, **void)
        case Irregularity.CARD_DRAWN_IN_ERROR:
            return Ruling(f"{s}(b)", use_card_as_next=True)
        case Irregularity.WRONG_CARD_COUNT:
            return Ruling(f"{s}(c)", **void)
        case Irregularity.DEALER_CARD_EXPOSED if game in (TCP, UTH):
            # 653a.13(d): Ante, Blind and Play are returned; Trips Wagers are still settled.
            return Ruling(f"{s}(d)", trips_still_settle=game == UTH and trips_placed, **void)
        case Irregularity.COMMUNITY_CARD_EXPOSED if game == LIR:
            return Ruling(f"{s}(d)", **void)
        case Irregularity.SHUFFLER_JAM:
            return Ruling(f"{s}(e)", reshuffle=True)
        case Irregularity.SHOE_JAM:
            return Ruling(f"{s}(f)", **void)
        case Irregularity.DEVICE_UNUSABLE:
            return Ruling(f"{s}(g)", out_of_order_first=True)
    raise NotApplicable(f"{what.value} does not arise in {game}")
